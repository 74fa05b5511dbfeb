/**
 * One person on three channels (issue 12): they write on WhatsApp (their phone), Messenger
 * (a PSID) and Instagram (an IGSID) to one account that has all three connected through the
 * API; that makes three contacts until the business merges them with
 * `POST /v1/contacts/{id}/merge`. Then replies on each channel reach the right address, and
 * inbound messages arriving while the merge runs all land on the contact that remains.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomPhone } from '../helpers.js';
import { fromPerson, mid, pageEvent, pageWebhook, scopedId } from '../fake-graph/page-webhooks.js';
import { inboundWebhook, waMessage, wamid } from '../fake-graph/webhooks.js';
import {
  business,
  connectedAccount,
  deliver,
  drain,
  events,
  jobsOf,
  startE2E,
  whatsappBody,
  type Connected,
  type E2E,
} from './whatsapp-e2e-helpers.js';
import {
  connectPageByApi,
  conversationsOf,
  post,
  recipientOf,
  sendApiBody,
  type PageConnected,
} from './pages-e2e-helpers.js';

let e: E2E;
let wa: Connected;
let messenger: PageConnected;
let instagram: PageConnected;
beforeAll(async () => {
  e = await startE2E();
  wa = await connectedAccount(e);
  messenger = await connectPageByApi(e, wa.acc, 'messenger');
  instagram = await connectPageByApi(e, wa.acc, 'instagram');
});
afterAll(() => e?.close());

const accountId = () => wa.acc.accountId;

interface Person {
  phone: string;
  psid: string;
  igsid: string;
}

function newPerson(): Person {
  const person = { phone: randomPhone(), psid: scopedId(), igsid: scopedId() };
  e.graph.addProfile({ id: person.psid, first_name: 'Ada', last_name: 'Lovelace' });
  e.graph.addProfile({ id: person.igsid, name: 'Ada L.', username: 'ada.l' });
  return person;
}

/** Signed webhooks (not yet processed) of one message on `channel`; answers its provider id. */
async function postMessage(
  person: Person,
  channel: 'whatsapp' | 'messenger' | 'instagram',
  text: string,
): Promise<string> {
  if (channel === 'whatsapp') {
    const id = wamid();
    const waId = person.phone.slice(1);
    await deliver(
      wa,
      inboundWebhook(business(wa), { waId, name: 'Ada' }, waMessage.text(waId, text, id)),
    );
    return id;
  }
  const c = channel === 'messenger' ? messenger : instagram;
  const sender = channel === 'messenger' ? person.psid : person.igsid;
  const id = mid();
  await post(
    c,
    pageWebhook(
      channel === 'messenger' ? 'page' : 'instagram',
      c.entryId,
      fromPerson(sender, c.entryId, pageEvent.text(text, id)),
    ),
  );
  return id;
}

/** The person writes once on each channel (processed); answers the three contacts made. */
async function writesEverywhere(person: Person) {
  const ids = {
    whatsapp: await postMessage(person, 'whatsapp', 'hi from WhatsApp'),
    messenger: await postMessage(person, 'messenger', 'hi from Messenger'),
    instagram: await postMessage(person, 'instagram', 'hi from Instagram'),
  };
  await drain(e, accountId());
  const of = async (id: string) => (await recipientOf(e, accountId(), id)).contact_id;
  return {
    whatsapp: await of(ids.whatsapp),
    messenger: await of(ids.messenger),
    instagram: await of(ids.instagram),
  };
}

function merge(into: string, other: string) {
  return wa.acc.call({
    method: 'POST',
    url: `/v1/contacts/${into}/merge`,
    payload: { contact_id: other },
  });
}

async function contactIds(): Promise<string[]> {
  const rows = await e.t.db
    .selectFrom('contacts')
    .select('id')
    .where('account_id', '=', accountId())
    .execute();
  return rows.map((r) => r.id).sort();
}

describe('one person on WhatsApp, Messenger and Instagram', () => {
  it('three contacts until merged twice; then one contact, three identities and conversations, and replies reach each address', async () => {
    const person = newPerson();
    const contacts = await writesEverywhere(person);
    expect(new Set(Object.values(contacts)).size).toBe(3);
    const show = async (id: string) =>
      (await wa.acc.call({ method: 'GET', url: `/v1/contacts/${id}` })).json();
    expect(await show(contacts.whatsapp)).toMatchObject({
      phone: person.phone,
      name: 'Ada',
      identities: [{ channel: 'whatsapp', id: person.phone }],
    });
    expect(await show(contacts.messenger)).toMatchObject({
      phone: null,
      name: 'Ada Lovelace',
      identities: [{ channel: 'messenger', id: person.psid }],
    });
    expect(await show(contacts.instagram)).toMatchObject({
      phone: null,
      name: 'Ada L.',
      identities: [{ channel: 'instagram', id: person.igsid }],
    });

    const first = await merge(contacts.whatsapp, contacts.messenger);
    expect(first.statusCode, first.body).toBe(200);
    const second = await merge(contacts.whatsapp, contacts.instagram);
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json()).toMatchObject({
      id: contacts.whatsapp,
      phone: person.phone,
      name: 'Ada',
      identities: [
        { channel: 'whatsapp', id: person.phone },
        { channel: 'instagram', id: person.igsid },
        { channel: 'messenger', id: person.psid },
      ],
    });
    expect(await show(contacts.whatsapp)).toEqual(second.json());
    for (const gone of [contacts.messenger, contacts.instagram]) {
      const res = await wa.acc.call({ method: 'GET', url: `/v1/contacts/${gone}` });
      expect(res.statusCode).toBe(404);
    }
    const conversations = (await conversationsOf(e, accountId())).filter(
      (c) => c.contact_id === contacts.whatsapp,
    );
    expect(conversations.map((c) => c.channel).sort()).toEqual([
      'instagram',
      'messenger',
      'whatsapp',
    ]);

    // Replies on each channel go to that channel's address of the one contact.
    e.graph.reset();
    for (const channel of ['whatsapp', 'messenger', 'instagram'] as const) {
      const res = await wa.acc.call({
        method: 'POST',
        url: '/v1/messages/send',
        payload: {
          contact_id: contacts.whatsapp,
          channel,
          type: 'text',
          content: `thanks, via ${channel}`,
        },
      });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toMatchObject({ status: 'sent' });
    }
    const bodies = (resource: string) =>
      e.graph.find({ method: 'POST', resource }).map((r) => r.body.toString('utf8'));
    expect(bodies(wa.sendMatcher.resource)).toEqual([
      whatsappBody(person.phone, 'text', { body: 'thanks, via whatsapp', preview_url: false }),
    ]);
    expect(bodies(messenger.sendMatcher.resource)).toEqual([
      sendApiBody(person.psid, { text: 'thanks, via messenger' }),
    ]);
    expect(bodies(instagram.sendMatcher.resource)).toEqual([
      sendApiBody(person.igsid, { text: 'thanks, via instagram' }),
    ]);
    expect(e.graph.last(messenger.sendMatcher)!.token).toBe(messenger.pageToken);
    expect(e.graph.last(instagram.sendMatcher)!.token).toBe(instagram.pageToken);

    // Later messages on the merged identities land on the contact that remains, unlooked-up.
    const later = await postMessage(person, 'instagram', 'one more thing');
    await drain(e, accountId());
    expect(await recipientOf(e, accountId(), later)).toMatchObject({
      contact_id: contacts.whatsapp,
      channel: 'instagram',
    });
    expect(e.graph.find({ method: 'GET', resource: person.igsid })).toEqual([]);
    expect(await contactIds()).toContain(contacts.whatsapp);
    expect(await contactIds()).not.toContain(contacts.instagram);
  });

  it('inbound messages on the merged identities, arriving while the merges run, all land on the remaining contact, once each', async () => {
    const ROUNDS = 6;
    const PER_CHANNEL = 4;
    for (let round = 0; round < ROUNDS; round++) {
      const person = newPerson();
      const contacts = await writesEverywhere(person);
      const before = await contactIds();

      // Webhooks (each posted, then its job run) and both merges, all at once; the order in
      // which they start changes from round to round.
      const mids: Array<{ id: string; channel: 'messenger' | 'instagram' }> = [];
      const inbound = (channel: 'messenger' | 'instagram', n: number) => async () => {
        const id = await postMessage(person, channel, `${channel} #${n} in round ${round}`);
        mids.push({ id, channel });
        await drain(e, accountId());
      };
      const tasks: Array<() => Promise<unknown>> = [];
      for (let n = 0; n < PER_CHANNEL; n++) {
        tasks.push(inbound('messenger', n), inbound('instagram', n));
      }
      const merges = [
        () => merge(contacts.whatsapp, contacts.messenger),
        () => merge(contacts.whatsapp, contacts.instagram),
      ];
      tasks.splice(round % (tasks.length + 1), 0, ...merges);
      if (round % 2 === 1) tasks.reverse();
      const results = await Promise.all(tasks.map((t) => t()));
      for (const r of results) {
        if (r && typeof r === 'object' && 'statusCode' in r) {
          const res = r as { statusCode: number; body: string };
          expect(res.statusCode, res.body).toBe(200);
        }
      }
      // Anything held back for a retry runs too.
      e.t.clock.advance(60_000);
      await drain(e, accountId());
      expect((await jobsOf(e, accountId())).filter((j) => j.kind === 'channel.inbound')).toEqual(
        [],
      );

      // No message lost, each once, on the remaining contact and the right channel.
      expect(mids).toHaveLength(2 * PER_CHANNEL);
      for (const m of mids) {
        expect(await recipientOf(e, accountId(), m.id)).toMatchObject({
          contact_id: contacts.whatsapp,
          channel: m.channel,
        });
      }
      const received = await events(e, accountId(), 'message.received');
      const ofRound = received.filter((ev) =>
        String((ev.data as { content: string }).content).endsWith(`in round ${round}`),
      );
      expect(ofRound).toHaveLength(2 * PER_CHANNEL);

      // No contact made again for a merged identity: the two others are gone, none new.
      const after = await contactIds();
      expect(after).toEqual(
        before.filter((id) => id !== contacts.messenger && id !== contacts.instagram),
      );
      const identities = await e.t.db
        .selectFrom('contact_identities')
        .select(['contact_id', 'channel', 'external_id'])
        .where('account_id', '=', accountId())
        .where('external_id', 'in', [person.psid, person.igsid])
        .orderBy('channel')
        .execute();
      expect(identities).toEqual([
        { contact_id: contacts.whatsapp, channel: 'instagram', external_id: person.igsid },
        { contact_id: contacts.whatsapp, channel: 'messenger', external_id: person.psid },
      ]);
      // Names were looked up once per identity, when each first wrote.
      expect(e.graph.find({ method: 'GET', resource: person.psid })).toHaveLength(1);
      expect(e.graph.find({ method: 'GET', resource: person.igsid })).toHaveLength(1);

      const show = await wa.acc.call({ method: 'GET', url: `/v1/contacts/${contacts.whatsapp}` });
      expect(show.json().identities).toEqual([
        { channel: 'whatsapp', id: person.phone },
        { channel: 'instagram', id: person.igsid },
        { channel: 'messenger', id: person.psid },
      ]);
    }

    // Exactly one conversation per (contact, channel) in the whole account.
    const conversations = await conversationsOf(e, accountId());
    const pairs = conversations.map((c) => `${c.contact_id} ${c.channel}`);
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(pairs.length).toBeGreaterThanOrEqual(3 * (ROUNDS + 1));
  });
});
