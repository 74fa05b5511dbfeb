import { startBareServer } from '../lib/bare.js';
import { delay } from '../lib/child.js';
import { expectJson, stringField } from '../lib/http.js';
import { measureAgainstBaseline, runLoad, type LoadTarget } from '../lib/load.js';
import { benchPhone, seedContacts } from '../lib/seed.js';
import type { Suite } from '../lib/suite.js';

const SEED_CONCURRENCY = 20;
const FILL_TIMEOUT_S = 600;
// Sandbox jobs of the conversation's messages (delivered after 1 s, read after 3 s by default).
const SETTLE_TIMEOUT_MS = 30_000;
const SETTLE_POLL_MS = 500;

interface ConversationBody {
  messages?: Array<{ status?: unknown }>;
}

export const messagesSuite: Suite = {
  name: 'messages',
  description:
    'POST /v1/messages/send (text, webchat) and GET /v1/conversations/{id} of a long ' +
    'conversation, against a bare Fastify route',
  async run(ctx) {
    const { service, settings } = ctx;
    const poolSize = settings.messagesContacts;
    const historySize = settings.conversationMessages;
    const account = await service.createAccount('bench messages');
    const auth = { authorization: `Bearer ${account.apiKey}` };
    const json = { ...auth, 'content-type': 'application/json' };

    // The contacts the sends cycle through, and one more for the long conversation.
    const seedStart = performance.now();
    const ids = await seedContacts(
      service.url,
      account.apiKey,
      poolSize + 1,
      SEED_CONCURRENCY,
      (n) => ({ phone: benchPhone(415, n), name: `Bench Recipient ${n}` }),
    );
    const seedS = (performance.now() - seedStart) / 1000;
    const historyContact = ids.pop() ?? '';
    ctx.log(
      `seeded ${poolSize + 1} contacts in ${seedS.toFixed(1)} s through POST /v1/contacts ` +
        `(${poolSize} to send to in turn, 1 for the long conversation) into account ${account.accountId}`,
    );

    // The long conversation: one send creates it, the rest go in concurrently.
    const sendBody = (contactId: string, n: number) => ({
      contact_id: contactId,
      channel: 'webchat',
      type: 'text',
      content: `Bench message ${n}: your order has shipped and will arrive on Thursday.`,
    });
    const first = await expectJson(201, `${service.url}/v1/messages/send`, {
      method: 'POST',
      token: account.apiKey,
      body: sendBody(historyContact, 0),
    });
    const conversationId = stringField(first, 'conversation_id');
    const fillStart = performance.now();
    if (historySize > 1) {
      let n = 1;
      await runLoad(
        {
          name: 'fill POST /v1/messages/send',
          url: service.url,
          requests: [
            {
              method: 'POST',
              path: '/v1/messages/send',
              headers: json,
              setupRequest: (req) => {
                req.body = JSON.stringify(sendBody(historyContact, n++));
                return req;
              },
            },
          ],
          expectedStatuses: [201],
        },
        {
          amount: historySize - 1,
          connections: Math.min(SEED_CONCURRENCY, historySize - 1),
          durationS: FILL_TIMEOUT_S,
        },
      );
    }
    const fillS = (performance.now() - fillStart) / 1000;

    // Let the sandbox move those messages to read, so that its jobs do not overlap the reads.
    const autoAdvance =
      service.extraEnv.SANDBOX_AUTO_ADVANCE ?? process.env.SANDBOX_AUTO_ADVANCE ?? 'true';
    const advancing = autoAdvance !== 'false' && autoAdvance !== '0';
    const settleDeadline = Date.now() + (advancing ? SETTLE_TIMEOUT_MS : 0);
    let conversation: ConversationBody = {};
    let pending = Infinity;
    for (;;) {
      conversation = await expectJson(200, `${service.url}/v1/conversations/${conversationId}`, {
        token: account.apiKey,
      });
      pending = (conversation.messages ?? []).filter(
        (m) => m.status === 'sent' || m.status === 'delivered',
      ).length;
      if (pending === 0 || Date.now() >= settleDeadline) break;
      await delay(SETTLE_POLL_MS);
    }
    const count = conversation.messages?.length ?? 0;
    if (count !== historySize) {
      throw new Error(
        `conversation ${conversationId} holds ${count} messages, expected ${historySize}`,
      );
    }
    ctx.log(
      `conversation ${conversationId}: ${count} messages (${historySize - 1} sent in ${fillS.toFixed(1)} s, ` +
        `${SEED_CONCURRENCY} concurrent), body ${Buffer.byteLength(JSON.stringify(conversation))} bytes; ` +
        (!advancing
          ? 'sandbox auto-advance is off: they stay sent'
          : pending === 0
            ? 'the sandbox has moved them all to read'
            : `${pending} still sent/delivered after ${SETTLE_TIMEOUT_MS / 1000} s (sandbox jobs may overlap the reads)`),
    );
    ctx.log(
      advancing
        ? 'sandbox auto-advance on (the default): each send also queues its delivered and read ' +
            'jobs, which the same process runs while the sends are measured'
        : 'sandbox auto-advance off: sends queue no status jobs',
    );

    // The baseline answers a real message of this account: same shape, same size.
    ctx.log(`message body: ${Buffer.byteLength(JSON.stringify(first))} bytes`);
    const bare = await startBareServer(ctx.projectRoot, first);
    ctx.defer(() => bare.stop());

    // Shared by all connections and runs: sends go to the pool's contacts in turn.
    let nextSend = 0;
    const targets: LoadTarget[] = [
      { name: 'bare Fastify GET (baseline)', url: bare.url },
      {
        // Measured before the sends, whose sandbox jobs would otherwise run during it.
        name: `GET /v1/conversations/{id} (${historySize} msgs)`,
        url: `${service.url}/v1/conversations/${conversationId}`,
        headers: auth,
        expectedStatuses: [200],
      },
      {
        name: 'POST /v1/messages/send',
        url: service.url,
        requests: [
          {
            method: 'POST',
            path: '/v1/messages/send',
            headers: json,
            setupRequest: (req) => {
              const n = nextSend++;
              req.body = JSON.stringify(sendBody(ids[n % ids.length] ?? '', n));
              return req;
            },
          },
        ],
        expectedStatuses: [201],
      },
    ];

    await measureAgainstBaseline(ctx, targets);
    await bare.stop();
    ctx.log(
      `(POST: ${nextSend} sends in all, warm-up included, cycling through ${poolSize} contacts on webchat; ` +
        `the bare route answers one ${Buffer.byteLength(JSON.stringify(first))}-byte message, ` +
        `the conversation read ${historySize} of them)`,
    );
  },
};
