import type { SecretBox } from '../connections/secret-box.js';

/** Opened secrets kept per dispatcher; past it the oldest goes (an account has at most 20 webhooks). */
const CACHE_ENTRIES = 10_000;

/**
 * Webhook signing secrets as stored: sealed under SECRETS_KEY (a SecretBox of `{ secret }`),
 * never in clear. Every delivery signs with its webhook's secret, so opened ones are kept,
 * keyed by the sealed bytes themselves: a box holds a random IV, so a secret sealed again is
 * another key, and a kept one can never be stale.
 */
export class WebhookSecrets {
  private readonly opened = new Map<string, string>();

  constructor(private readonly box: SecretBox) {}

  seal(secret: string): Buffer {
    return this.box.seal({ secret });
  }

  /** The secret, or null when the box cannot be opened with this key (another SECRETS_KEY). */
  open(sealed: Buffer): string | null {
    const key = sealed.toString('base64');
    const kept = this.opened.get(key);
    if (kept !== undefined) return kept;
    let secret: string | undefined;
    try {
      secret = this.box.open(sealed).secret;
    } catch {
      return null;
    }
    if (typeof secret !== 'string') return null;
    if (this.opened.size >= CACHE_ENTRIES) this.opened.delete(this.opened.keys().next().value!);
    this.opened.set(key, secret);
    return secret;
  }
}
