// The contacts the contacts seed writes (bench/contacts/seed.ts) and its suite searches for
// (bench/suites/contacts-million.ts): every value derived from the account and the row's number,
// so that the suite knows what matches how much without reading the table.

import { rand, ulidId } from '../inbox/data.js';

export const BIG_NAME = 'Bench contacts: a million';
export const MEDIUM_NAME = 'Bench contacts: ten thousand';
export const SMALL_PREFIX = 'Bench contacts: small';
export const BIG_COUNT = 1_000_000;
export const MEDIUM_COUNT = 10_000;
export const SMALL_COUNT = 1_000;
/** Beside the big one: one account of 10,000 (the creates' yardstick) and 98 of 1,000. */
export const OTHER_ACCOUNTS = 99;

const DAY = 86_400_000;

/** One contact in ten is a Maria: the search that matches 10 % (no other name holds "maria"). */
export const COMMON_FIRST = 'Maria';
const FIRST = (
  'Olivia Liam Emma Noah Ava Oliver Sophia Elijah Isabella James Mia William Amelia Benjamin ' +
  'Harper Lucas Evelyn Henry Abigail Alexander Emily Mason Ella Michael Elizabeth Ethan Camila ' +
  'Daniel Luna Jacob Sofia Logan Avery Jackson Mila Levi Aria Sebastian Scarlett Mateo Penelope ' +
  'Jack Layla Owen Chloe Theodore Victoria Aiden Madison Samuel'
).split(' ');
const PREFIX = ['Al', 'Bar', 'Cor', 'Dun', 'Ev', 'Fen', 'Gar', 'Hol', 'Ink', 'Jor'];
const MIDDLE = ['an', 'el', 'or', 'ix', 'um', 'ad', 'en', 'ir', 'ob', 'us'];
const SUFFIX = ['by', 'son', 'ton', 'ley', 'man', 'well', 'ford', 'wick', 'dale', 'worth'];
/** 1,000 last names, each on about 0.1 % of the contacts. */
export function lastNameOf(k: number): string {
  return `${PREFIX[Math.floor(k / 100) % 10]}${MIDDLE[Math.floor(k / 10) % 10]}${SUFFIX[k % 10]}`;
}
/** 50 tags; a contact has 1 to 5, the first ones more often (tag-01 on about a fifth). */
export const TAGS = Array.from({ length: 50 }, (_, k) => `tag-${String(k + 1).padStart(2, '0')}`);
/** Held by every contact of the big account: the audience of the million-recipient broadcast. */
export const AUDIENCE_TAG = 'subscribers';
const AREAS = [212, 213, 305, 312, 404, 415, 469, 512, 617, 646, 702, 713, 718, 773, 818, 917];
const PLANS = ['free', 'starter', 'pro', 'enterprise'];
const CITIES = (
  'Lisbon Madrid Paris Berlin Rome Vienna Prague Warsaw Dublin London Oslo Stockholm Helsinki ' +
  'Athens Sofia Bucharest Budapest Zagreb Riga Vilnius'
).split(' ');

export interface SeedContact {
  id: string;
  phone: string;
  name: string;
  email: string | null;
  tags: string[];
  lifecycleStage: string | null;
  customFields: Record<string, string | number>;
  createdAt: number;
}

/** Contact `i` of account number `account` (0 the big one) of `count`, created over two years. */
export function contactOf(account: number, count: number, i: number, now: number): SeedContact {
  const r = (salt: number) => rand(account + 1_000, i, salt);
  const first = r(1) < 0.1 ? COMMON_FIRST : FIRST[Math.floor(r(2) * FIRST.length)]!;
  const last = lastNameOf(Math.floor(r(3) * 1_000));
  const tags = new Set<string>();
  const howMany = 1 + Math.floor(r(4) * 5);
  for (let k = 0; k < howMany; k++) tags.add(TAGS[Math.floor(r(10 + k) ** 2 * TAGS.length)]!);
  if (account === 0) tags.add(AUDIENCE_TAG);
  const stage = r(5);
  const createdAt = now - 2 * 365 * DAY + Math.floor(((i + r(6)) / count) * 2 * 365 * DAY);
  return {
    id: ulidId('con', createdAt, account * 2_000_000 + i, 9),
    // Seven digits spread over the whole range (a permutation, so none repeats in an area).
    phone: `+1${AREAS[i % AREAS.length]}${String((Math.floor(i / AREAS.length) * 7_919_837 + 1_234_567) % 10_000_000).padStart(7, '0')}`,
    name: `${first} ${last}`,
    email: r(7) < 0.7 ? `${first.toLowerCase()}.${last.toLowerCase()}${i}@example.com` : null,
    tags: [...tags],
    lifecycleStage:
      stage < 0.25 ? 'lead' : stage < 0.4 ? 'customer' : stage < 0.45 ? 'churned' : null,
    customFields: {
      plan: PLANS[Math.floor(r(8) * PLANS.length)]!,
      city: CITIES[Math.floor(r(9) * CITIES.length)]!,
      customer_since: 2015 + Math.floor(r(20) * 12),
    },
    createdAt,
  };
}
