// The screenshots of docs/app.md, desktop and phone, with realistic content; axe on the phone
// layout while at it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import { expectStatus, receive } from '../inbox-helpers.js';
import {
  axeViolations,
  namedContact,
  newAgent,
  parcelPhoto,
  PHONE,
  RUN_BROWSER,
  signIn,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

// Written into docs/ only when asked (UPDATE_SCREENSHOTS=1), so that a test run leaves the
// checkout as it was; otherwise into a temporary folder, still taken and checked.
const DOCS = process.env.UPDATE_SCREENSHOTS
  ? new URL('../../docs/', import.meta.url).pathname
  : `${mkdtempSync(path.join(tmpdir(), 'switchboard-screens-'))}/`;

describe.skipIf(!RUN_BROWSER)('the screenshots of docs/app.md', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('takes the inbox and a conversation, desktop and phone (and the phone layout passes axe)', async () => {
    const acc = await newAccount(app.t);
    const { context, page, user } = await newAgent(app, acc, 'Ada Lovelace', { role: 'admin' });
    const team = await acc.call({ method: 'POST', url: '/v1/teams', payload: { name: 'Billing' } });
    const people: [string, string, 'me' | 'team' | null][] = [
      ['Wei Chen', 'Is the blue one back in stock?', null],
      ['Sofia Rossi', 'Perfect, see you Friday.', 'me'],
      ['Lukas Schmidt', 'My package says delivered but it is not here.', null],
      ['Amara Okafor', 'Do you ship to Lagos?', 'team'],
      ['Kenji Watanabe', 'The invoice PDF came through, thanks.', 'me'],
      ['Maria Garcia', 'Hi! Can I change the delivery address for order 4471?', 'me'],
    ];
    const ids: Record<string, string> = {};
    for (const [name, text, to] of people) {
      const contact = await namedContact(acc, name);
      const { conversation_id: id } = await receive(acc, contact.id, 'whatsapp', text);
      ids[name] = id as string;
      if (to) {
        const body = to === 'me' ? { user_id: user.id } : { team_id: team.json().id as string };
        expectStatus(
          await acc.call({ method: 'POST', url: `/v1/conversations/${id}/assign`, payload: body }),
          200,
        );
      }
    }
    const maria = ids['Maria Garcia']!;
    // Her contact as an agent keeps it: email, tags, a custom field, a lifecycle stage.
    const mariaContact = (
      await acc.call({ method: 'GET', url: `/v1/conversations/${maria}` })
    ).json().contact_id as string;
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${mariaContact}`,
        payload: {
          name: 'Maria Garcia',
          email: 'maria.garcia@example.com',
          tags: ['vip', 'madrid'],
          custom_fields: { order: '4471' },
        },
      }),
      200,
    );
    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/contacts/${mariaContact}/lifecycle`,
        payload: { lifecycle_stage: 'customer' },
      }),
      200,
    );
    await page.goto(`${app.base}/app/conversations/${maria}`);
    const log = page.getByRole('log', { name: 'Messages' });
    const reply = page.getByRole('textbox', { name: 'Reply' });
    const say = async (text: string) => {
      await reply.fill(text);
      await reply.press('Enter');
      await log.getByText(text).waitFor();
    };
    await say('Of course! What is the new address?');
    await receive(acc, (await contactOf(maria))!, 'whatsapp', 'Calle Mayor 12, 28013 Madrid');
    await log.getByText('Calle Mayor 12').waitFor();
    await page.getByRole('button', { name: 'Private note' }).click();
    await page
      .getByRole('textbox', { name: 'Note' })
      .fill('Address changed in the courier portal before dispatch.');
    await page.getByRole('textbox', { name: 'Note' }).press('Enter');
    await log.getByText('courier portal').waitFor();
    await page.getByRole('button', { name: 'Private note' }).click();
    await say('Done: order 4471 now goes to Calle Mayor 12.');
    const chooser = page.waitForEvent('filechooser');
    await page.getByRole('button', { name: 'Attach file' }).click();
    await (
      await chooser
    ).setFiles({ name: 'parcel.png', mimeType: 'image/png', buffer: parcelPhoto() });
    await reply.fill('Packed and labelled with the new address.');
    await page.getByRole('button', { name: 'Send' }).click();
    await log.getByRole('img').waitFor();
    await say('Tracking: https://track.example.com/4471');

    // Statuses: read, read, delivered, and a failure with its reason.
    const sent = (await acc.call({ method: 'GET', url: `/v1/conversations/${maria}/messages` }))
      .json()
      .data.filter((m: { direction: string }) => m.direction === 'outbound')
      .reverse() as { id: string }[];
    const statuses: [string, string?][] = [
      ['read'],
      ['read'],
      ['delivered'],
      ['failed', 'The recipient is not reachable right now (131049)'],
    ];
    for (const [i, [status, reason]] of statuses.entries()) {
      expectStatus(
        await acc.call({
          method: 'POST',
          url: `/v1/sandbox/messages/${sent[i]!.id}/status`,
          payload: { status, ...(reason ? { reason } : {}) },
        }),
        200,
      );
    }
    // Spread the conversation over the morning, as a real one is.
    await sql`
      WITH ordered AS (
        SELECT id, row_number() OVER (ORDER BY created_at DESC, id DESC) AS n
        FROM messages WHERE account_id = ${acc.accountId} AND conversation_id = ${maria})
      UPDATE messages m SET created_at = now() - make_interval(mins => (ordered.n - 1)::int * 7)
      FROM ordered WHERE m.account_id = ${acc.accountId} AND m.id = ordered.id`.execute(app.t.db);
    await sql`
      UPDATE notes SET created_at = now() - make_interval(mins => 18)
      WHERE account_id = ${acc.accountId} AND conversation_id = ${maria}`.execute(app.t.db);
    // And the other conversations over the hours before it.
    for (const [i, [name]] of people.slice(0, -1).entries()) {
      const ago = (people.length - 1 - i) * 23 + 31;
      await sql`
        UPDATE messages SET created_at = now() - make_interval(mins => ${ago})
        WHERE account_id = ${acc.accountId} AND conversation_id = ${ids[name]!}`.execute(app.t.db);
      await sql`
        UPDATE conversations SET updated_at = now() - make_interval(mins => ${ago}),
               last_inbound_at = now() - make_interval(mins => ${ago})
        WHERE account_id = ${acc.accountId} AND id = ${ids[name]!}`.execute(app.t.db);
    }
    await page.reload();
    await log.getByText('Failed').waitFor();
    await page.screenshot({ path: `${DOCS}app-conversation-desktop.png` });
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Inbox' })
      .click();
    await page.getByRole('tab', { name: /^All/ }).click();
    await page
      .getByRole('list', { name: 'Conversations' })
      .getByRole('link', { name: /Wei Chen/ })
      .waitFor();
    await page.mouse.move(0, 0);
    await page.screenshot({ path: `${DOCS}app-inbox-desktop.png` });
    await context.close();

    const phone = await signIn(app, user, PHONE);
    await phone.page.getByRole('tab', { name: /^All/ }).click();
    await phone.page
      .getByRole('list', { name: 'Conversations' })
      .getByRole('link', { name: /Wei Chen/ })
      .waitFor();
    expect(await axeViolations(phone.page)).toEqual([]);
    await phone.page.screenshot({ path: `${DOCS}app-inbox-phone.png` });
    await phone.page
      .getByRole('list', { name: 'Conversations' })
      .getByRole('link', { name: /Maria Garcia/ })
      .click();
    await phone.page.getByRole('log', { name: 'Messages' }).getByText('Failed').waitFor();
    await phone.page
      .getByRole('log', { name: 'Messages' })
      .getByRole('img')
      .evaluate((img) => (img as unknown as { decode(): Promise<void> }).decode());
    expect(await axeViolations(phone.page)).toEqual([]);
    await phone.page.screenshot({ path: `${DOCS}app-conversation-phone.png` });
    await phone.context.close();

    async function contactOf(id: string): Promise<string | undefined> {
      return (await acc.call({ method: 'GET', url: `/v1/conversations/${id}` })).json().contact_id;
    }
  });
});
