/**
 * The soak's steady mixed load through the spreader, each kind at its own pace: reads of
 * contacts and conversations, contact creates, WhatsApp template sends (each with a number of
 * its own in its parameters, so the fake Graph API shows how often it got it), and signed
 * inbound WhatsApp webhooks. Writes carry an Idempotency-Key and are tried again on a cut
 * connection, a 503 or a 409 (the key still held by a request a killed process never ended),
 * as a client should; every attempt is counted.
 */
import { hubSignature, waContact, waMessage } from '../../test/fake-graph/webhooks.js';
import { benchPhone } from '../lib/seed.js';
import type { WhatsAppChannel } from '../lib/whatsapp.js';

export type Kind = 'list contacts' | 'list conversations' | 'create contact' | 'send' | 'inbound';

export interface KindFigures {
  attempts: number;
  statuses: Record<string, number>;
  /** Attempts whose connection was cut or refused (no answer). */
  cut: number;
  /** Requests whose every attempt failed (given up after RETRY_FOR_MS). */
  givenUp: number;
  /** Paced requests skipped because too many of the kind were in flight. */
  skipped: number;
  latenciesMs: number[];
}

/** A 5xx answer or a cut connection, when it happened (ms since the load began). */
export interface Failure {
  atMs: number;
  kind: Kind;
  what: string;
}

const RETRY_FOR_MS = 120_000;
const MAX_IN_FLIGHT = 20;
const TIMEOUT_MS = 30_000;

export interface LoadTargets {
  baseUrl: string;
  apiKey: string;
  channel: WhatsAppChannel;
  templateName: string;
  /** Contacts the sends go to. */
  contactIds: string[];
  /** Epoch ms that failure times count from. */
  origin: number;
}

export class MixedLoad {
  readonly figures = new Map<Kind, KindFigures>();
  readonly failures: Failure[] = [];
  /** Numbers of the sends answered 201 (their parameter `soak-send-N`). */
  readonly acceptedSends: number[] = [];
  readonly createdPhones: string[] = [];
  /** Inbound message ids (wamid) of the webhooks answered 200. */
  readonly acceptedInbound: string[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly inFlight = new Map<Kind, number>();
  private readonly pending = new Set<Promise<void>>();
  private counter = 0;

  constructor(private readonly t: LoadTargets) {}

  /** Starts every kind at `perSecond` requests a second. */
  start(perSecond: Record<Kind, number>): void {
    for (const [kind, rate] of Object.entries(perSecond) as [Kind, number][]) {
      if (rate <= 0) continue;
      this.timers.push(setInterval(() => this.fire(kind), 1000 / rate));
    }
  }

  /** Stops starting requests and waits for those in flight (their retries included). */
  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    await Promise.all(this.pending);
  }

  private figuresOf(kind: Kind): KindFigures {
    let f = this.figures.get(kind);
    if (!f) {
      f = { attempts: 0, statuses: {}, cut: 0, givenUp: 0, skipped: 0, latenciesMs: [] };
      this.figures.set(kind, f);
    }
    return f;
  }

  private fire(kind: Kind): void {
    const f = this.figuresOf(kind);
    const busy = this.inFlight.get(kind) ?? 0;
    if (busy >= MAX_IN_FLIGHT) {
      f.skipped++;
      return;
    }
    this.inFlight.set(kind, busy + 1);
    const n = this.counter++;
    const p = this.one(kind, n)
      .catch(() => undefined)
      .finally(() => {
        this.inFlight.set(kind, (this.inFlight.get(kind) ?? 1) - 1);
        this.pending.delete(p);
      });
    this.pending.add(p);
  }

  private async one(kind: Kind, n: number): Promise<void> {
    const key = { authorization: `Bearer ${this.t.apiKey}` };
    const json = { ...key, 'content-type': 'application/json' };
    switch (kind) {
      case 'list contacts':
        await this.request(kind, 'GET', '/v1/contacts?limit=20', key, undefined, false);
        return;
      case 'list conversations':
        await this.request(kind, 'GET', '/v1/conversations?limit=20', key, undefined, false);
        return;
      case 'create contact': {
        const phone = benchPhone(646, n);
        const status = await this.request(
          kind,
          'POST',
          '/v1/contacts',
          { ...json, 'idempotency-key': `soak-create-${n}` },
          JSON.stringify({ phone, name: `Soak ${n}` }),
          true,
        );
        if (status === 201) this.createdPhones.push(phone);
        return;
      }
      case 'send': {
        const contactId = this.t.contactIds[n % this.t.contactIds.length]!;
        const status = await this.request(
          kind,
          'POST',
          '/v1/messages/send',
          { ...json, 'idempotency-key': `soak-send-${n}` },
          JSON.stringify({
            contact_id: contactId,
            channel: 'whatsapp',
            type: 'template',
            template_name: this.t.templateName,
            template_params: ['soak', `soak-send-${n}`],
          }),
          true,
        );
        if (status === 201) this.acceptedSends.push(n);
        return;
      }
      case 'inbound': {
        const waId = benchPhone(917, n % 300).slice(1);
        const message = waMessage.text(waId, `Soak inbound ${n}`) as { id: string };
        const body = JSON.stringify(webhookOf(this.t.channel, waId, message));
        const status = await this.request(
          kind,
          'POST',
          this.t.channel.webhookPath,
          {
            'content-type': 'application/json',
            'x-hub-signature-256': hubSignature(this.t.channel.appSecret, body),
          },
          body,
          true,
        );
        if (status === 200) this.acceptedInbound.push(message.id);
        return;
      }
    }
  }

  /** The final status (0: given up), every attempt counted. */
  private async request(
    kind: Kind,
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    retry: boolean,
  ): Promise<number> {
    const f = this.figuresOf(kind);
    const until = Date.now() + RETRY_FOR_MS;
    for (let wait = 250; ; wait = Math.min(wait * 2, 4_000)) {
      const started = performance.now();
      f.attempts++;
      let status = 0;
      try {
        const res = await fetch(`${this.t.baseUrl}${path}`, {
          method,
          headers,
          body,
          signal: AbortSignal.timeout(TIMEOUT_MS),
        });
        await res.arrayBuffer();
        status = res.status;
        f.latenciesMs.push(performance.now() - started);
        f.statuses[status] = (f.statuses[status] ?? 0) + 1;
        if (status >= 500) this.failures.push({ atMs: this.now(), kind, what: String(status) });
      } catch (err) {
        f.cut++;
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        this.failures.push({
          atMs: this.now(),
          kind,
          what: `cut (${cause?.code ?? cause?.message ?? (err as Error).name})`,
        });
      }
      const again = status === 0 || status === 503 || status === 502 || status === 409;
      if (!retry || !again) return status;
      if (Date.now() + wait > until) {
        f.givenUp++;
        return 0;
      }
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  private now(): number {
    return Date.now() - this.t.origin;
  }
}

/** One inbound text in Meta's webhook shape, to the channel's phone number. */
function webhookOf(channel: WhatsAppChannel, waId: string, message: unknown) {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: channel.businessAccountId,
        changes: [
          {
            value: {
              messaging_product: 'whatsapp',
              metadata: {
                display_phone_number: channel.displayPhoneNumber,
                phone_number_id: channel.phoneNumberId,
              },
              contacts: [waContact(waId, `Soak Sender ${waId.slice(-4)}`)],
              messages: [message],
            },
            field: 'messages',
          },
        ],
      },
    ],
  };
}
