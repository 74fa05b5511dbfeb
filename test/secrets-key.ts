import { createHash } from 'node:crypto';
import { SecretBox } from '../src/connections/secret-box.js';
import { WebhookSecrets } from '../src/webhooks/webhook-secrets.js';

/**
 * The SECRETS_KEY of every test app (startTestApp) and of every process a test starts on a
 * DATABASE_URL, unless the test picks another: the same in every run, so that what one run
 * sealed in a database the next can open.
 */
export const TEST_SECRETS_KEY = createHash('sha256').update('switchboard tests').digest();

/** SECRETS_KEY as the environment of a started process holds it. */
export const TEST_SECRETS_ENV = { SECRETS_KEY: TEST_SECRETS_KEY.toString('base64') };

/** Webhook secrets sealed and opened under `key` (the tests' key unless given). */
export function testWebhookSecrets(key: Buffer = TEST_SECRETS_KEY): WebhookSecrets {
  return new WebhookSecrets(new SecretBox(key));
}

/** What migrations are given to seal webhook secrets, under the tests' key. */
export const sealForTests = (secret: string): Buffer => testWebhookSecrets().seal(secret);
