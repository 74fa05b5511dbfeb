import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { createContact, eventsOf, expectError, expectStatus, receive } from '../inbox-helpers.js';
import { signedInUser, type SessionClient } from '../users/session-helpers.js';
import { SseClient } from './sse-client.js';

// Two API processes on one database: presence posted to one reaches streams on the other.
let one: TestApp;
let two: TestApp;
const bases: string[] = [];
beforeAll(async () => {
  one = await startTestApp();
  two = await startTestApp();
  for (const t of [one, two]) {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    bases.push(`http://127.0.0.1:${(t.app.server.address() as { port: number }).port}`);
  }
});
afterAll(async () => {
  await one.close();
  await two.close();
});

async function conversationOf(acc: TestAccount): Promise<string> {
  const contact = await createContact(acc);
  return (await receive(acc, contact.id)).conversation_id;
}

const present = (user: SessionClient, conversation: string, state: string) =>
  user.call({
    method: 'POST',
    url: `/v1/conversations/${conversation}/presence`,
    payload: { state },
  });

const stream = (base: string, user: SessionClient, query = '') =>
  SseClient.open(`${base}/v1/events/stream${query}`, { cookie: `sb_session=${user.token}` });

describe('presence', () => {
  it('reaches the streams of every process at once, with no id, and expires in 30 s', async () => {
    const acc = await newAccount(one);
    const ann = await signedInUser(one, acc, { name: 'Ann' });
    const bob = await signedInUser(one, acc, { name: 'Bob' });
    const conversation = await conversationOf(acc);
    const here = await stream(bases[0]!, bob);
    const there = await stream(bases[1]!, bob);
    const other = await stream(bases[1]!, await signedInUser(one, await newAccount(one)));
    try {
      expect([here.status, there.status]).toEqual([200, 200]);
      // The streams are subscribed once their headers arrived; one report reaches both.
      const before = Date.now();
      const res = await present(ann, conversation, 'typing');
      expectStatus(res, 204);
      expect(res.body).toBe('');
      for (const s of [here, there]) {
        await s.until(
          () => s.messages.some((m) => m.event === 'presence.updated'),
          5_000,
          'presence',
        );
        const message = s.messages.find((m) => m.event === 'presence.updated')!;
        expect(message.id).toBeUndefined();
        const body = JSON.parse(message.data);
        expect(body).toEqual({
          event: 'presence.updated',
          timestamp: expect.any(String),
          data: {
            conversation_id: conversation,
            user: { id: ann.userId, name: 'Ann' },
            state: 'typing',
            expires_at: expect.any(String),
          },
        });
        const expires = Date.parse(body.data.expires_at);
        expect(expires - before).toBeGreaterThanOrEqual(29_000);
        expect(expires - Date.now()).toBeLessThanOrEqual(30_000);
      }
      // Another account's stream hears nothing; nothing is stored or sent to webhooks.
      await new Promise((r) => setTimeout(r, 300));
      expect(other.messages.filter((m) => m.event === 'presence.updated')).toEqual([]);
      expect((await eventsOf(one.db, acc.accountId)).map((e) => e.type)).not.toContain(
        'presence.updated',
      );
    } finally {
      for (const s of [here, there, other]) s.close();
    }
  });

  it('a stream that asks for other events only hears none; ?events=presence.updated is accepted', async () => {
    const acc = await newAccount(one);
    const ann = await signedInUser(one, acc, { name: 'Ann' });
    const conversation = await conversationOf(acc);
    const only = await stream(bases[0]!, ann, '?events=message.received');
    const wants = await stream(bases[0]!, ann, '?events=presence.updated');
    try {
      expect(wants.status).toBe(200);
      expectStatus(await present(ann, conversation, 'viewing'), 204);
      await wants.until(() => wants.messages.length > 0, 5_000, 'presence');
      expect(JSON.parse(wants.messages[0]!.data).data.state).toBe('viewing');
      expect(only.messages).toEqual([]);
    } finally {
      only.close();
      wants.close();
    }
  });

  it('needs a session (422 with an API key), a known conversation (404) and a known state (422)', async () => {
    const acc = await newAccount(one);
    const ann = await signedInUser(one, acc);
    const conversation = await conversationOf(acc);
    expectError(
      await acc.call({
        method: 'POST',
        url: `/v1/conversations/${conversation}/presence`,
        payload: { state: 'viewing' },
      }),
      422,
      'state',
    );
    expectError(await present(ann, 'conv_00000000000000000000000000', 'viewing'), 404);
    expectError(await present(ann, conversation, 'sleeping'), 422, 'state');
    const stranger = await signedInUser(one, await newAccount(one));
    expectError(await present(stranger, conversation, 'viewing'), 404);
  });
});
