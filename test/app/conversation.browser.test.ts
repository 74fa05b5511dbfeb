// A conversation in Chromium: reply, note, canned responses, an image attachment, a template
// outside the window, and a failed message with its reason and Retry.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import { createContact, createTemplate, expectStatus, receive } from '../inbox-helpers.js';
import {
  axeViolations,
  namedContact,
  newAgent,
  parcelPhoto,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

describe.skipIf(!RUN_BROWSER)('a conversation in Chromium', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('replies (Enter sends, Shift+Enter a new line), writes a note, and inserts several canned responses by /shortcut', async () => {
    const acc = await newAccount(app.t);
    for (const [shortcut, content] of [
      ['hello', 'Hello! Thanks for writing to us.'],
      ['ship', 'Orders ship within 2 working days.'],
      ['bye', 'Have a good day!'],
    ]) {
      expectStatus(
        await acc.call({
          method: 'POST',
          url: '/v1/canned-responses',
          payload: { shortcut, content },
        }),
        201,
      );
    }
    const contact = await namedContact(acc, 'Grace Hopper');
    const { conversation_id: id } = await receive(
      acc,
      contact.id,
      'whatsapp',
      'When will it ship?',
    );
    const { context, page, user } = await newAgent(app, acc, 'Ada Lovelace');
    await page.goto(`${app.base}/app/conversations/${id}`);
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('When will it ship?');

    const reply = page.getByRole('textbox', { name: 'Reply' });
    await reply.fill('Thanks, it ships today.');
    await reply.press('Shift+Enter');
    await reply.pressSequentially('Tracking follows.');
    expect(await reply.inputValue()).toBe('Thanks, it ships today.\nTracking follows.');
    await reply.press('Enter');
    await expect
      .poll(() => log.getByRole('article', { name: 'Sent message' }).last().textContent())
      .toContain('Thanks, it ships today.\nTracking follows.');
    // The reply is cleared once the API accepts it, which may be after its message.created
    // event has drawn it in the log.
    await expect.poll(() => reply.inputValue()).toBe('');
    // Written through the session: the message carries its author.
    const sent = await acc.call({ method: 'GET', url: `/v1/conversations/${id}/messages` });
    expect(sent.json().data[0]).toMatchObject({
      direction: 'outbound',
      author: { type: 'user', id: user.id, name: 'Ada Lovelace' },
    });
    await expect
      .poll(() => log.getByRole('article', { name: 'Sent message' }).last().textContent())
      .toContain('Ada Lovelace');

    // Canned responses: `/` at the start of any line, several in one message.
    await reply.pressSequentially('/hel');
    const options = page.getByRole('listbox', { name: 'Canned responses' });
    await expect.poll(() => options.getByRole('option').count()).toBe(1);
    expect(await axeViolations(page)).toEqual([]);
    await reply.press('Enter');
    await reply.press('Shift+Enter');
    await reply.pressSequentially('/sh');
    await expect.poll(() => options.getByRole('option').first().textContent()).toContain('ship');
    await reply.press('Tab');
    await reply.press('Shift+Enter');
    await reply.pressSequentially('/b');
    await expect.poll(() => options.getByRole('option').count()).toBe(1);
    await reply.press('Enter');
    expect(await reply.inputValue()).toBe(
      'Hello! Thanks for writing to us.\nOrders ship within 2 working days.\nHave a good day!',
    );
    await reply.press('Enter');
    await expect.poll(() => log.textContent()).toContain('Orders ship within 2 working days.');

    // A private note, set apart, with its author.
    await page.getByRole('button', { name: 'Private note' }).click();
    expect(
      await page.getByRole('button', { name: 'Private note' }).getAttribute('aria-pressed'),
    ).toBe('true');
    await page.getByRole('textbox', { name: 'Note' }).fill('VIP: handle with care');
    await page.getByRole('button', { name: 'Send' }).click();
    const note = log.getByRole('article', { name: 'Private note' });
    await expect.poll(() => note.textContent()).toContain('VIP: handle with care');
    expect(await note.textContent()).toContain('Ada Lovelace');
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });

  it('keeps the keys typed after a canned response where they were typed, however late the next frame', async () => {
    const acc = await newAccount(app.t);
    for (const [shortcut, content] of [
      ['ship', 'Orders ship within 2 working days.'],
      ['bye', 'Have a good day!'],
    ]) {
      expectStatus(
        await acc.call({
          method: 'POST',
          url: '/v1/canned-responses',
          payload: { shortcut, content },
        }),
        201,
      );
    }
    const contact = await namedContact(acc, 'Katherine Johnson');
    const { conversation_id: id } = await receive(acc, contact.id, 'whatsapp', 'Any news?');
    const { context, page } = await newAgent(app, acc, 'Ada Lovelace');
    await page.goto(`${app.base}/app/conversations/${id}`);
    await expect
      .poll(() => page.getByRole('log', { name: 'Messages' }).textContent())
      .toContain('Any news?');
    // A busy browser: animation frames wait until the test lets them run.
    await page.evaluate(() => {
      type Frame = (at: number) => void;
      const w = globalThis as unknown as {
        requestAnimationFrame: (run: Frame) => number;
        runFrames: () => void;
      };
      const held: Frame[] = [];
      w.runFrames = () => held.splice(0).forEach((run) => run(performance.now()));
      w.requestAnimationFrame = (run) => held.push(run);
    });
    const reply = page.getByRole('textbox', { name: 'Reply' });
    const options = page.getByRole('listbox', { name: 'Canned responses' });
    await reply.pressSequentially('/sh');
    await expect.poll(() => options.getByRole('option').count()).toBe(1);
    await reply.press('Tab');
    await reply.press('Shift+Enter');
    // The frame after the insert comes only now, after the new line: the caret stays after it.
    await page.evaluate(() => (globalThis as unknown as { runFrames: () => void }).runFrames());
    await reply.pressSequentially('/b');
    await expect.poll(() => options.getByRole('option').count()).toBe(1);
    await reply.press('Enter');
    expect(await reply.inputValue()).toBe('Orders ship within 2 working days.\nHave a good day!');
    await context.close();
  });

  it('attaches an image: uploaded with POST /v1/media, sent with its media_id, shown from the service with the session', async () => {
    const acc = await newAccount(app.t);
    const contact = await namedContact(acc, 'Kenji Watanabe');
    const { conversation_id: id } = await receive(acc, contact.id, 'whatsapp', 'A photo please?');
    const { context, page } = await newAgent(app, acc);
    await page.goto(`${app.base}/app/conversations/${id}`);
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('A photo please?');

    const requests: { method: string; url: string; body: string | null }[] = [];
    page.on('request', (r) =>
      requests.push({ method: r.method(), url: r.url(), body: r.postData() }),
    );
    const chooser = page.waitForEvent('filechooser');
    await page.getByRole('button', { name: 'Attach file' }).click();
    await (
      await chooser
    ).setFiles({ name: 'parcel.png', mimeType: 'image/png', buffer: parcelPhoto() });
    await page.getByRole('textbox', { name: 'Reply' }).fill('Here it is, at your door.');
    await page.getByRole('button', { name: 'Send' }).click();

    const image = log.getByRole('img', { name: 'Here it is, at your door.' });
    await image.waitFor();
    await expect
      .poll(() =>
        image.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth),
      )
      .toBe(320);
    const src = new URL((await image.getAttribute('src'))!, app.base);
    expect(src.origin).toBe(app.base);
    expect(src.pathname).toMatch(/^\/v1\/media\/med_/);
    // Behind the session: without the cookie the same address is refused.
    expect((await fetch(src)).status).toBe(401);

    const upload = requests.find((r) => r.method === 'POST' && r.url.endsWith('/v1/media'));
    expect(upload).toBeDefined();
    const send = requests.find((r) => r.url.endsWith('/v1/messages/send'));
    const body = JSON.parse(send!.body!) as Record<string, unknown>;
    expect(body).toMatchObject({ type: 'image', media_id: expect.stringMatching(/^med_/) });
    expect(body.media_url).toBeUndefined();
    await context.close();
  });

  it('outside the 24-hour window offers only a template: picker, parameters, preview, send', async () => {
    const acc = await newAccount(app.t);
    const template = await createTemplate(acc, 'Hi {{1}}, your order {{2}} is ready for pickup.');
    // A conversation the business opened with a template: the contact never wrote, so no window.
    const contact = await createContact(acc);
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${contact.id}`,
        payload: { name: 'Lukas Schmidt' },
      }),
      200,
    );
    const first = await acc.call({
      method: 'POST',
      url: '/v1/messages/send',
      payload: {
        contact_id: contact.id,
        channel: 'whatsapp',
        type: 'template',
        template_name: template.name,
        template_params: ['Lukas', '#1'],
      },
    });
    expectStatus(first, 201);
    const { context, page } = await newAgent(app, acc);
    await page.goto(`${app.base}/app/conversations/${first.json().conversation_id}`);
    const pane = page.getByRole('region', { name: 'Conversation with Lukas Schmidt' });
    await expect.poll(() => pane.textContent()).toContain('24-hour window is closed');
    expect(await page.getByRole('textbox', { name: 'Reply' }).count()).toBe(0);

    await page.getByRole('button', { name: 'Send template' }).click();
    const dialog = page.getByRole('dialog', { name: 'Send a template' });
    await dialog.waitFor();
    await dialog.getByRole('combobox', { name: 'Template' }).waitFor();
    await dialog.getByRole('textbox', { name: 'Parameter {{1}}' }).fill('Lukas');
    await dialog.getByRole('textbox', { name: 'Parameter {{2}}' }).fill('#4471');
    await expect
      .poll(() => dialog.getByText('your order #4471').textContent())
      .toBe('Hi Lukas, your order #4471 is ready for pickup.');
    expect(await axeViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Send template' }).click();
    await expect.poll(() => dialog.count()).toBe(0);
    const log = page.getByRole('log', { name: 'Messages' });
    await expect.poll(() => log.textContent()).toContain('your order #4471 is ready');
    const messages = await acc.call({
      method: 'GET',
      url: `/v1/conversations/${first.json().conversation_id}/messages`,
    });
    expect(messages.json().data[0]).toMatchObject({
      type: 'template',
      content: 'Hi Lukas, your order #4471 is ready for pickup.',
    });
    await context.close();
  });

  it('edits the contact from the conversation: name, email, tags, custom fields (one removed), lifecycle stage', async () => {
    const acc = await newAccount(app.t);
    const contact = await namedContact(acc, 'Ada Byron');
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${contact.id}`,
        payload: { custom_fields: { order: '4471', plan: 'basic' } },
      }),
      200,
    );
    const { conversation_id: id } = await receive(acc, contact.id, 'whatsapp', 'Hello');
    const { context, page } = await newAgent(app, acc, 'Grace Hopper');
    await page.goto(`${app.base}/app/conversations/${id}`);
    const panel = page.getByRole('region', { name: 'Contact' });
    await panel.getByRole('textbox', { name: 'Name', exact: true }).fill('Ada Lovelace');
    await panel.getByRole('textbox', { name: 'Email', exact: true }).fill('ada@example.com');
    await panel.getByRole('textbox', { name: 'Tags' }).fill('vip, math');
    await panel.getByRole('combobox', { name: 'Lifecycle stage' }).selectOption('customer');
    await panel.getByRole('button', { name: 'Remove field order' }).click();
    await panel.getByRole('button', { name: 'Add field' }).click();
    await panel.getByRole('textbox', { name: 'Field 2 name' }).fill('city');
    await panel.getByRole('textbox', { name: 'Field 2 value' }).fill('London');
    await panel.getByRole('button', { name: 'Save contact' }).click();
    await expect.poll(() => panel.getByRole('status').textContent()).toBe('Saved.');

    const saved = await acc.call({ method: 'GET', url: `/v1/contacts/${contact.id}` });
    expect(saved.json()).toMatchObject({
      name: 'Ada Lovelace',
      email: 'ada@example.com',
      tags: ['vip', 'math'],
      custom_fields: { plan: 'basic', city: 'London' },
      lifecycle_stage: 'customer',
    });
    expect(saved.json().custom_fields).not.toHaveProperty('order');

    // A refusal is said, and nothing is lost from the form.
    await panel.getByRole('textbox', { name: 'Tags' }).fill(`vip, ${'x'.repeat(201)}`);
    await panel.getByRole('button', { name: 'Save contact' }).click();
    await expect.poll(() => panel.getByRole('status').textContent()).toContain('tags');
    expect(await panel.getByRole('textbox', { name: 'Name', exact: true }).inputValue()).toBe(
      'Ada Lovelace',
    );
    expect(await axeViolations(page)).toEqual([]);
    await context.close();
  });

  it('shows a failed message with its reason, and Retry sends it again', async () => {
    const acc = await newAccount(app.t);
    const contact = await namedContact(acc, 'Amara Okafor');
    const { conversation_id: id } = await receive(
      acc,
      contact.id,
      'whatsapp',
      'Do you ship to Lagos?',
    );
    const { context, page } = await newAgent(app, acc);
    await page.goto(`${app.base}/app/conversations/${id}`);
    const reply = page.getByRole('textbox', { name: 'Reply' });
    await reply.fill('Yes, in 5 to 7 days.');
    await reply.press('Enter');
    const log = page.getByRole('log', { name: 'Messages' });
    const sent = log.getByRole('article', { name: 'Sent message' });
    await expect.poll(() => sent.count()).toBe(1);
    const messageId = (
      await acc.call({ method: 'GET', url: `/v1/conversations/${id}/messages` })
    ).json().data[0].id as string;

    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/sandbox/messages/${messageId}/status`,
        payload: { status: 'failed', reason: 'The number is not on WhatsApp (131026)' },
      }),
      200,
    );
    await expect.poll(() => sent.first().textContent()).toContain('Failed');
    expect(await sent.first().textContent()).toContain('The number is not on WhatsApp (131026)');
    expect(await axeViolations(page)).toEqual([]);

    await sent.first().getByRole('button', { name: 'Retry' }).click();
    await expect.poll(() => sent.count()).toBe(2);
    expect(await sent.last().textContent()).toContain('Yes, in 5 to 7 days.');
    expect(await sent.last().textContent()).not.toContain('Failed');
    const after = (
      await acc.call({ method: 'GET', url: `/v1/conversations/${id}/messages` })
    ).json().data;
    expect(after.map((m: { status: string }) => m.status)).toEqual([
      expect.not.stringMatching(/failed/),
      'failed',
      'delivered',
    ]);
    await context.close();
  });
});
