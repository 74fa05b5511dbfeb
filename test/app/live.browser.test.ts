// Two agents in two browser contexts: what one does the other sees live (assignment, resolve,
// reopen), and who is viewing or typing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STREAM_EVENT_TYPES } from '../../src/events/event-types.js';
import { newAccount } from '../helpers.js';
import { expectStatus, receive } from '../inbox-helpers.js';
import {
  axeViolations,
  namedContact,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

const KNOWN = new Set<string>(STREAM_EVENT_TYPES);

describe.skipIf(!RUN_BROWSER)('two agents at once in Chromium', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('assigns (me, a user, a team), resolves and reopens, seen live by a second agent who also sees "is viewing" and "is typing"', async () => {
    const acc = await newAccount(app.t);
    const team = await acc.call({ method: 'POST', url: '/v1/teams', payload: { name: 'Billing' } });
    expectStatus(team, 201);
    const contact = await namedContact(acc, 'Maria Garcia');
    const { conversation_id: id } = await receive(
      acc,
      contact.id,
      'whatsapp',
      'Can I change my address?',
    );
    const ada = await newAgent(app, acc, 'Ada Lovelace');
    const bob = await newAgent(app, acc, 'Bob Builder');
    const url = `${app.base}/app/conversations/${id}`;
    await bob.page.goto(url);
    const bobPane = bob.page.getByRole('region', { name: 'Conversation with Maria Garcia' });
    await bobPane.waitFor();
    await ada.page.goto(url);
    const adaPane = ada.page.getByRole('region', { name: 'Conversation with Maria Garcia' });
    await adaPane.waitFor();

    // Presence: each says so as the conversation opens, and while typing.
    await bobPane.getByText('Ada Lovelace is viewing').waitFor({ timeout: 15_000 });
    await adaPane.getByText('Bob Builder is viewing').waitFor({ timeout: 15_000 });
    await ada.page.getByRole('textbox', { name: 'Reply' }).pressSequentially('Sure, what is');
    await bobPane.getByText('Ada Lovelace is typing').waitFor({ timeout: 15_000 });

    const header = (pane: typeof bobPane) => pane.getByRole('banner').or(pane.locator('header'));
    const assign = async (item: string) => {
      await adaPane.getByRole('button', { name: 'Assign' }).click();
      const menu = ada.page.getByRole('menu', { name: 'Assign' });
      await menu.waitFor();
      await menu.getByRole('menuitem', { name: item }).click();
    };

    await assign('Assign to me');
    await expect
      .poll(() => header(bobPane).first().textContent())
      .toContain('Assigned to Ada Lovelace');
    await expect.poll(() => bob.page.getByRole('tab', { name: /^Unassigned 0$/ }).count()).toBe(1);

    await assign('Bob Builder');
    await expect
      .poll(() => header(bobPane).first().textContent())
      .toContain('Assigned to Bob Builder');
    await expect.poll(() => bob.page.getByRole('tab', { name: /^Mine 1$/ }).count()).toBe(1);
    await expect.poll(() => ada.page.getByRole('tab', { name: /^Mine 0$/ }).count()).toBe(1);

    await adaPane.getByRole('button', { name: 'Assign' }).click();
    expect(await axeViolations(ada.page)).toEqual([]);
    await ada.page
      .getByRole('menu', { name: 'Assign' })
      .getByRole('menuitem', { name: 'Billing' })
      .click();
    await expect.poll(() => header(bobPane).first().textContent()).toContain('Assigned to Billing');
    await expect.poll(() => bob.page.getByRole('tab', { name: /^Mine 0$/ }).count()).toBe(1);

    await adaPane.getByRole('button', { name: 'Resolve' }).click();
    await bobPane.getByRole('button', { name: 'Reopen' }).waitFor({ timeout: 15_000 });
    await expect.poll(() => bob.page.getByRole('tab', { name: /^All 0$/ }).count()).toBe(1);
    await adaPane.getByRole('button', { name: 'Reopen' }).click();
    await bobPane.getByRole('button', { name: 'Resolve' }).waitFor({ timeout: 15_000 });
    await expect.poll(() => bob.page.getByRole('tab', { name: /^All 1$/ }).count()).toBe(1);

    await ada.context.close();
    await bob.context.close();
  });

  // message.created and note.created (DESIGN §5 "Live updates") come with the events branch:
  // until the server knows them, another agent's reply reaches a second browser on its next
  // refetch only.
  it.skipIf(!KNOWN.has('message.created') || !KNOWN.has('note.created'))(
    'shows a second agent what the first wrote (message.created, note.created), with no reload',
    async () => {
      const acc = await newAccount(app.t);
      const contact = await namedContact(acc, 'Maria Garcia');
      const { conversation_id: id } = await receive(acc, contact.id, 'whatsapp', 'Hello?');
      const ada = await newAgent(app, acc, 'Ada Lovelace');
      const bob = await newAgent(app, acc, 'Bob Builder');
      await bob.page.goto(`${app.base}/app/conversations/${id}`);
      await ada.page.goto(`${app.base}/app/conversations/${id}`);
      await bob.page.getByRole('log', { name: 'Messages' }).getByText('Hello?').waitFor();
      // What one agent writes, the other sees without a reload.
      await ada.page.getByRole('textbox', { name: 'Reply' }).fill('Sure, what is the new address?');
      await ada.page.getByRole('textbox', { name: 'Reply' }).press('Enter');
      await expect
        .poll(() => bob.page.getByRole('log', { name: 'Messages' }).textContent(), {
          timeout: 15_000,
        })
        .toContain('Sure, what is the new address?');
      await bob.page.getByRole('button', { name: 'Private note' }).click();
      await bob.page.getByRole('textbox', { name: 'Note' }).fill('Check the courier first.');
      await bob.page.getByRole('textbox', { name: 'Note' }).press('Enter');
      await expect
        .poll(() => ada.page.getByRole('log', { name: 'Messages' }).textContent(), {
          timeout: 15_000,
        })
        .toContain('Check the courier first.');
      await ada.context.close();
      await bob.context.close();
    },
  );
});
