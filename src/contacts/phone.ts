import { parsePhoneNumberFromString } from 'libphonenumber-js';

const E164 = /^\+[1-9]\d{7,14}$/;

/** Strict E.164 (no spaces or punctuation), and a length possible for the number's country. */
export function isValidE164(phone: string): boolean {
  if (!E164.test(phone)) return false;
  return parsePhoneNumberFromString(phone)?.isPossible() ?? false;
}
