import { hash, randomBytes } from 'node:crypto';

/** A new secret token (invite links, session cookies): 32 random bytes, URL-safe. */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** What is stored of a token: its SHA-256, so that a copy of the table opens nothing. */
export function tokenHash(token: string): string {
  return hash('sha256', token, 'hex');
}
