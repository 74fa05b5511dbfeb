// A conversation of 10,000 messages (seeded in SQL) opens on its newest page and loads older
// pages as it scrolls up, keeping what is on screen where it was.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newAccount } from '../helpers.js';
import { receive } from '../inbox-helpers.js';
import {
  namedContact,
  newAgent,
  RUN_BROWSER,
  startBrowserApp,
  type BrowserApp,
} from './app-helpers.js';

const HISTORY = 10_000;

describe.skipIf(!RUN_BROWSER)('a long history in Chromium', () => {
  let app: BrowserApp;
  beforeAll(async () => {
    app = await startBrowserApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('opens a conversation of 10,000 messages on the newest and scrolls back page by page, keeping the scroll position', async () => {
    const acc = await newAccount(app.t);
    const contact = await namedContact(acc, 'Sofia Rossi');
    const { conversation_id: id } = await receive(acc, contact.id, 'whatsapp', 'The latest one');
    // Older than the message that opened it: message #1 the oldest, #10000 just before it.
    await sql`
      INSERT INTO messages (account_id, id, conversation_id, direction, type, content, status, created_at, updated_at)
      SELECT ${acc.accountId}, 'msg_h' || lpad(i::text, 6, '0'), ${id},
             CASE WHEN i % 3 = 0 THEN 'outbound' ELSE 'inbound' END, 'text', 'Message #' || i,
             CASE WHEN i % 3 = 0 THEN 'read' ELSE 'delivered' END,
             now() - make_interval(secs => ${HISTORY + 60} - i),
             now() - make_interval(secs => ${HISTORY + 60} - i)
      FROM generate_series(1, ${HISTORY}) AS i`.execute(app.t.db);

    const { context, page } = await newAgent(app, acc);
    await page.goto(`${app.base}/app/conversations/${id}`);
    const log = page.getByRole('log', { name: 'Messages' });
    const messages = log.getByRole('article');
    await log.getByText('The latest one').waitFor();
    // The newest at the bottom, in view; one page of 50 in the DOM.
    await expect.poll(() => messages.count()).toBe(50);
    expect(await messages.last().textContent()).toContain('The latest one');
    expect(await messages.first().textContent()).toContain('Message #9952');
    expect(await log.getByText('The latest one').isVisible()).toBe(true);
    const scroller = page.locator('.log-scroll');
    const atBottom = await scroller.evaluate(
      (el) => el.scrollHeight - el.scrollTop - el.clientHeight < 4,
    );
    expect(atBottom).toBe(true);

    // Scroll up: each time the top is near, the page before loads above, and the message
    // that was on screen stays where it was.
    for (let pages = 2; pages <= 5; pages++) {
      const anchor = messages.first();
      const label = (await anchor.locator('p.text').textContent())!;
      const held = log.getByText(label, { exact: true });
      await scroller.evaluate((el) => (el.scrollTop = 0));
      const before = (await held.boundingBox())!.y;
      await expect.poll(() => messages.count()).toBe(pages * 50);
      await page.waitForTimeout(50);
      const after = (await held.boundingBox())!.y;
      expect(Math.abs(after - before), `${label} moved`).toBeLessThan(4);
      // Still at the top of the log's view, not pushed down by the 50 that came in above it.
      const top = (await scroller.boundingBox())!.y;
      expect(after - top, `${label} pushed down`).toBeLessThan(150);
      expect(after - top).toBeGreaterThanOrEqual(0);
    }
    expect(await messages.first().textContent()).toContain(`Message #${HISTORY - 5 * 50 + 2}`);
    await context.close();
  });
});
