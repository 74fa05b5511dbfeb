// Runs in every test file: a response that docs/openapi.json does not describe fails the test
// during which it was given (test/openapi-conformance.ts collects them).
import { afterEach } from 'vitest';
import { takeMismatches } from './openapi-conformance.js';

afterEach(() => {
  const found = takeMismatches();
  if (found.length > 0)
    throw new Error(`responses that docs/openapi.json does not describe:\n${found.join('\n')}`);
});
