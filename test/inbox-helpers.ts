import { sql } from 'kysely';
import { expect } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import type { Db } from '../src/db/database.js';
import type { EventType } from '../src/events/event-types.js';
import { randomPhone, type TestAccount, type TestClock } from './helpers.js';

/**
 * Stops the clock: `now()` no longer follows real time, only `advance()` moves it. `aheadMs`
 * starts it that far ahead of real time, so that jobs it schedules never fall due for a runner
 * on real time in a concurrently running test file.
 */
export function freezeClock(clock: TestClock, aheadMs = 0): void {
  let at = clock.now().getTime() + aheadMs;
  clock.now = () => new Date(at);
  clock.advance = (ms: number) => {
    at += ms;
  };
}

export function expectStatus(res: LightMyRequestResponse, status: number): void {
  expect(res.statusCode, res.body).toBe(status);
}

/** A 422 (or other) error whose details name `field`. */
export function expectError(
  res: LightMyRequestResponse,
  status: number,
  field?: string,
): { code: string; message: string } {
  expectStatus(res, status);
  const error = res.json().error;
  expect(error.code).toBe(
    status === 422
      ? 'validation_error'
      : status === 404
        ? 'not_found'
        : status === 409
          ? 'conflict'
          : error.code,
  );
  if (field !== undefined) {
    expect(
      error.details?.map((d: { field: string }) => d.field),
      res.body,
    ).toContain(field);
  }
  return error;
}

export async function createContact(
  acc: TestAccount,
  phone = randomPhone(),
): Promise<{ id: string; phone: string }> {
  const res = await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone } });
  expectStatus(res, 201);
  return res.json();
}

/** An inbound text from the contact, which opens the 24-hour window on that channel. */
export async function receive(
  acc: TestAccount,
  contactId: string,
  channel = 'whatsapp',
  content = 'hello',
) {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/sandbox/inbound',
    payload: { channel, contact_id: contactId, type: 'text', content },
  });
  expectStatus(res, 201);
  return res.json();
}

export async function sendText(
  acc: TestAccount,
  contactId: string,
  channel = 'webchat',
  content = 'hi there',
) {
  return acc.call({
    method: 'POST',
    url: '/v1/messages/send',
    payload: { contact_id: contactId, channel, type: 'text', content },
  });
}

export async function createTemplate(
  acc: TestAccount,
  body: string,
  review: 'approved' | 'rejected' | null = 'approved',
  name = `tpl_${Math.random().toString(36).slice(2, 10)}`,
): Promise<{ id: string; name: string; status: string }> {
  const res = await acc.call({ method: 'POST', url: '/v1/templates', payload: { name, body } });
  expectStatus(res, 201);
  if (review === null) return res.json();
  const reviewed = await acc.call({
    method: 'POST',
    url: `/v1/sandbox/templates/${res.json().id}/review`,
    payload: { status: review },
  });
  expectStatus(reviewed, 200);
  return reviewed.json();
}

export async function createUser(
  acc: TestAccount,
  name = 'Agent',
): Promise<{ id: string; name: string; email: string }> {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/users',
    payload: { name, email: `${Math.random().toString(36).slice(2)}@example.com` },
  });
  expectStatus(res, 201);
  return res.json();
}

/** The ids of the account's `message.send` jobs (none once every send has settled). */
/**
 * Runs `run` while the database refuses to insert any message with this content, as a fault
 * would: whichever statement or transaction holds that message fails as a whole.
 */
export async function withMessageRefused<T>(
  db: Db,
  content: string,
  run: () => Promise<T>,
): Promise<T> {
  await sql`
    CREATE FUNCTION test_refuse_message() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.content = ${sql.lit(content)} THEN RAISE EXCEPTION 'refused by the test'; END IF;
      RETURN NEW;
    END $$`.execute(db);
  await sql`CREATE TRIGGER test_refuse_message BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION test_refuse_message()`.execute(db);
  try {
    return await run();
  } finally {
    await sql`DROP TRIGGER test_refuse_message ON messages`.execute(db);
    await sql`DROP FUNCTION test_refuse_message()`.execute(db);
  }
}

export async function sendJobsOf(db: Db, accountId: string): Promise<{ id: string }[]> {
  return db
    .selectFrom('jobs')
    .select('id')
    .where('account_id', '=', accountId)
    .where('kind', '=', 'message.send')
    .execute();
}

/** The account's events, oldest first, with `data` parsed. */
export async function eventsOf(
  db: Db,
  accountId: string,
  type?: EventType,
): Promise<{ type: string; data: unknown }[]> {
  let q = db.selectFrom('events').select(['type', 'data']).where('account_id', '=', accountId);
  if (type) q = q.where('type', '=', type);
  const rows = await q.orderBy('seq').execute();
  return rows.map((r) => ({
    type: r.type,
    data: typeof r.data === 'string' ? JSON.parse(r.data) : r.data,
  }));
}
