import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals secrets the service must read back (connections', webhooks' signing secrets, replay
 * records that hold one) with AES-256-GCM under the service's SECRETS_KEY: a box is
 * `version (1 byte) | iv (12) | tag (16) | ciphertext`, so a tampered box or a wrong key fails
 * to open rather than yielding garbage.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('a secret box needs a 32-byte key');
  }

  seal(secrets: Record<string, string>): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(JSON.stringify(secrets), 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
  }

  open(box: Buffer): Record<string, string> {
    if (box.length < 1 + IV_BYTES + TAG_BYTES || box[0] !== VERSION)
      throw new Error('not a secret box of a known version');
    const iv = box.subarray(1, 1 + IV_BYTES);
    const tag = box.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAuthTag(tag);
    const body = Buffer.concat([
      decipher.update(box.subarray(1 + IV_BYTES + TAG_BYTES)),
      decipher.final(),
    ]);
    return JSON.parse(body.toString('utf8')) as Record<string, string>;
  }
}
