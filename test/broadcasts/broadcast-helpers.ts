import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect, vi } from 'vitest';
import type { AppConfig } from '../../src/services.js';
import type { Db } from '../../src/db/database.js';
import { JobRunner } from '../../src/jobs/job-runner.js';
import {
  TestClock,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';

export { createPrivateDatabase } from '../helpers.js';

/** `startTestApp` of test/helpers.ts, on the given database. */
export function startAppOn(url: string, config: Partial<AppConfig> = {}): Promise<TestApp> {
  return startTestApp({ databaseUrl: url, config });
}

export function runnerOf(t: TestApp): JobRunner {
  return new JobRunner({
    db: t.db,
    clock: t.clock,
    log: t.app.log,
    handlers: t.services.jobHandlers,
  });
}

/**
 * Stops the clock: `now()` stays put (or, with `tickMs`, moves by that much at every reading, as
 * real time passes while a request runs) and only `advance()` moves it otherwise, so times compared
 * to the millisecond are exact. Returns the function that lets it follow real time again (never
 * going back before the time it reached).
 */
export function freezeClock(clock: TestClock, opts: { tickMs?: number } = {}): () => void {
  let at = clock.now().getTime();
  const tick = opts.tickMs ?? 0;
  const now = vi.spyOn(clock, 'now').mockImplementation(() => {
    const reading = new Date(at);
    at += tick;
    return reading;
  });
  const advance = vi.spyOn(clock, 'advance').mockImplementation((ms: number) => {
    at += ms;
  });
  return () => {
    now.mockRestore();
    advance.mockRestore();
    const behind = at - clock.now().getTime();
    if (behind > 0) clock.advance(behind);
  };
}

export function expectStatus(res: LightMyRequestResponse, status: number): void {
  expect(res.statusCode, res.body).toBe(status);
}

/** An error answer: its status, its code, and (when given) the field its details name. */
export function expectError(
  res: LightMyRequestResponse,
  status: number,
  code: string,
  field?: string,
): void {
  expectStatus(res, status);
  const error = res.json().error;
  expect(error.code, res.body).toBe(code);
  expect(typeof error.message).toBe('string');
  if (field !== undefined)
    expect(
      error.details?.map((d: { field: string }) => d.field),
      res.body,
    ).toContain(field);
}

export interface ContactJson {
  id: string;
  phone: string;
  tags: string[];
}

export async function createContact(
  acc: TestAccount,
  body: { tags?: string[]; phone?: string } = {},
): Promise<ContactJson> {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/contacts',
    payload: { phone: body.phone ?? randomPhone(), ...(body.tags ? { tags: body.tags } : {}) },
  });
  expectStatus(res, 201);
  return res.json();
}

export async function setStage(
  acc: TestAccount,
  contactId: string,
  stage: string | null,
): Promise<void> {
  expectStatus(
    await acc.call({
      method: 'POST',
      url: `/v1/contacts/${contactId}/lifecycle`,
      payload: { lifecycle_stage: stage },
    }),
    200,
  );
}

/** An inbound text from the contact on the channel (it opens the 24-hour window there). */
export async function inbound(
  acc: TestAccount,
  contactId: string,
  channel: string,
  content = 'hello',
): Promise<{ id: string; conversation_id: string }> {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/sandbox/inbound',
    payload: { channel, contact_id: contactId, type: 'text', content },
  });
  expectStatus(res, 201);
  return res.json();
}

export async function createTemplate(
  acc: TestAccount,
  body: string,
  review: 'approved' | 'rejected' | null,
  name = `tpl_${randomBytes(5).toString('hex')}`,
): Promise<{ id: string; name: string }> {
  const res = await acc.call({ method: 'POST', url: '/v1/templates', payload: { name, body } });
  expectStatus(res, 201);
  if (review) await reviewTemplate(acc, res.json().id, review);
  return res.json();
}

export async function reviewTemplate(
  acc: TestAccount,
  id: string,
  status: 'approved' | 'rejected',
): Promise<void> {
  expectStatus(
    await acc.call({
      method: 'POST',
      url: `/v1/sandbox/templates/${id}/review`,
      payload: { status },
    }),
    200,
  );
}

export function postBroadcast(acc: TestAccount, payload: unknown): Promise<LightMyRequestResponse> {
  return acc.call({
    method: 'POST',
    url: '/v1/broadcasts',
    payload: payload as Record<string, unknown>,
  });
}

export interface BroadcastJson {
  id: string;
  name: string;
  channel: string;
  audience: Record<string, unknown>;
  message: Record<string, unknown>;
  status: string;
  stats: { sent: number; delivered: number; read: number; replied: number; failed: number };
  failure_reason: string | null;
  scheduled_at: string | null;
  created_at: string;
}

/** Creates a broadcast (expecting 201); defaults: webchat, a text message, sent now. */
export async function createBroadcast(
  acc: TestAccount,
  body: {
    audience: Record<string, unknown>;
    channel?: string;
    message?: Record<string, unknown>;
    scheduled_at?: string;
    name?: string;
  },
): Promise<BroadcastJson> {
  const res = await postBroadcast(acc, {
    name: body.name ?? 'Broadcast',
    channel: body.channel ?? 'webchat',
    audience: body.audience,
    message: body.message ?? { type: 'text', content: 'Big news!' },
    ...(body.scheduled_at !== undefined ? { scheduled_at: body.scheduled_at } : {}),
  });
  expectStatus(res, 201);
  return res.json();
}

export async function getBroadcast(acc: TestAccount, id: string): Promise<BroadcastJson> {
  const res = await acc.call({ method: 'GET', url: `/v1/broadcasts/${id}` });
  expectStatus(res, 200);
  return res.json();
}

export function recipientsOf(db: Db, accountId: string, broadcastId: string) {
  return db
    .selectFrom('broadcast_recipients')
    .select(['contact_id', 'conversation_id', 'message_id', 'failure_reason', 'replied_at'])
    .where('account_id', '=', accountId)
    .where('broadcast_id', '=', broadcastId)
    .orderBy('contact_id')
    .execute();
}

/** The broadcast's outbound messages, with the contact of each one's conversation. */
export function messagesOf(db: Db, accountId: string, broadcastId: string) {
  return db
    .selectFrom('messages as m')
    .innerJoin('conversations as c', (j) =>
      j.onRef('c.account_id', '=', 'm.account_id').onRef('c.id', '=', 'm.conversation_id'),
    )
    .select([
      'm.id',
      'm.conversation_id',
      'm.direction',
      'm.type',
      'm.content',
      'm.status',
      'c.contact_id',
      'c.channel',
    ])
    .where('m.account_id', '=', accountId)
    .where('m.broadcast_id', '=', broadcastId)
    .orderBy('c.contact_id')
    .execute();
}

export async function completedEvents(
  db: Db,
  accountId: string,
  broadcastId: string,
): Promise<unknown[]> {
  const rows = await db
    .selectFrom('events')
    .select(['data'])
    .where('account_id', '=', accountId)
    .where('type', '=', 'broadcast.completed')
    .orderBy('seq')
    .execute();
  return rows.map((r) => r.data).filter((d) => (d as { id: string }).id === broadcastId);
}

export function jobsOf(db: Db, accountId: string) {
  return db
    .selectFrom('jobs')
    .select(['id', 'kind', 'payload', 'run_at', 'attempts', 'locked_until'])
    .where('account_id', '=', accountId)
    .orderBy('run_at')
    .execute();
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
