import type { Suite } from '../lib/suite.js';
import { contactsSuite } from './contacts.js';

/** Every suite, in the order `bench/run.ts` runs them when none is named. */
export const suites: readonly Suite[] = [contactsSuite];
