import { parsePhoneNumberFromString } from 'libphonenumber-js';

const E164 = /^\+[1-9]\d{7,14}$/;

/**
 * Answers for recently checked numbers: a pure function of the string, and a parse costs tens
 * of microseconds, which adds up when every inbound message's sender is checked.
 */
const checked = new Map<string, boolean>();
const CHECKED_MAX = 10_000;

/** Strict E.164 (no spaces or punctuation), and a length possible for the number's country. */
export function isValidE164(phone: string): boolean {
  if (!E164.test(phone)) return false;
  let valid = checked.get(phone);
  if (valid === undefined) {
    valid = parsePhoneNumberFromString(phone)?.isPossible() ?? false;
    if (checked.size >= CHECKED_MAX) checked.delete(checked.keys().next().value!);
    checked.set(phone, valid);
  }
  return valid;
}
