import type {
  ChannelProvider,
  InboundMessage,
  ProviderResolver,
  StatusUpdate,
} from '../channels/channel.js';
import type { Clock } from '../clock.js';
import type { ContactsService } from '../contacts/contacts.service.js';
import type { ConversationsRepository } from '../conversations/conversations.repository.js';
import type { Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import type { AppError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import type { BackgroundGate } from '../jobs/background-gate.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { TemplatesService } from '../templates/templates.service.js';
import type { MediaFetcher, Uploads } from './media.js';
import type { MessageObserver } from './message-observer.js';
import type { MessageRow, MessagesRepository, QueuedMessage } from './messages.repository.js';
import type { Message, SendMessageBody } from './messages.schema.js';
import { ReceiveService, type PhoneInboundMessage } from './receive.service.js';
import type { SendPipeline } from './send-pipeline.js';
import { MessageQueue, type QueuedBatch } from './sending/queue.js';
import { QueueRepository } from './sending/queue.repository.js';
import { SendService } from './sending/send.service.js';
import { StatusService } from './status.service.js';
import { StatusRepository } from './status.repository.js';

export { CUSTOMER_WINDOW_MS } from './window.js';
export { SEND_WAIT_MS } from './sending/send.service.js';
export { noIdentity } from './sending/queue.js';
export type { Draft, QueueResult, QueuedBatch, Recipient } from './sending/queue.js';
export type { PhoneInboundMessage } from './receive.service.js';

/**
 * The messaging core as the rest of the service sees it: sending (sending/: API sends, the one
 * queue path, dispatch through the SendPipeline), receiving (receive.service.ts) and status
 * updates (status.service.ts), wired from one set of dependencies.
 */
export class MessagesService {
  private readonly sending: SendService;
  private readonly queueing: MessageQueue;
  private readonly receiving: ReceiveService;
  private readonly statuses: StatusService;
  private readonly gate: BackgroundGate | undefined;

  constructor(deps: {
    tx: Transactor;
    messages: MessagesRepository;
    conversations: ConversationsRepository;
    contacts: ContactsService;
    templates: TemplatesService;
    providers: ProviderResolver;
    pipeline: SendPipeline;
    jobs: JobQueue;
    observer: MessageObserver;
    /** How long a send's first attempt holds its job (SEND_LEASE_MS by default). */
    sendLeaseMs?: number;
    /** How long an API send waits for the provider's answer (SEND_WAIT_MS by default). */
    sendWaitMs?: number;
    outbox: Outbox;
    fetchMedia: MediaFetcher;
    /** Files uploaded to send by `media_id`. */
    uploads?: Uploads;
    clock: Clock;
    log?: { error(obj: object, msg: string): void };
    /** Told of each API send while it runs: background work yields to it. */
    gate?: BackgroundGate;
  }) {
    this.queueing = new MessageQueue({
      db: deps.tx.db,
      queue: new QueueRepository(),
      templates: deps.templates,
      jobs: deps.jobs,
      clock: deps.clock,
      sendLeaseMs: deps.sendLeaseMs,
    });
    this.sending = new SendService({ ...deps, queue: this.queueing });
    this.gate = deps.gate;
    this.receiving = new ReceiveService(deps);
    this.statuses = new StatusService({ ...deps, statuses: new StatusRepository() });
  }

  /** See SendService.send. */
  send(scope: Scope, body: SendMessageBody): Promise<Message> {
    const done = this.gate?.interactive();
    return this.sending.send(scope, body).finally(done);
  }

  /** See MessageQueue.queue. */
  queue(
    trx: Tx,
    accountId: string,
    batch: Parameters<MessageQueue['queue']>[2],
  ): Promise<QueuedBatch> {
    return this.queueing.queue(trx, accountId, batch);
  }

  /** See SendService.dispatch. */
  dispatch(
    accountId: string,
    channel: Channel,
    job: { id: string; lease: Date },
    queued: QueuedMessage[],
    provider?: ChannelProvider,
    attempt = 1,
    connectionId?: string | null,
  ): Promise<Map<string, MessageRow>> {
    return this.sending.dispatch(accountId, channel, job, queued, provider, attempt, connectionId);
  }

  /** See SendService.failQueued. */
  failQueued(trx: Tx, accountId: string, ids: string[], reason: string): Promise<void> {
    return this.sending.failQueued(trx, accountId, ids, reason);
  }

  /** See ReceiveService.receive. */
  receive(scope: Scope, inbound: InboundMessage): Promise<Message> {
    return this.receiving.receive(scope, inbound);
  }

  /** See ReceiveService.receiveMany. */
  receiveMany(scope: Scope, inbound: PhoneInboundMessage[]): Promise<Array<Message | AppError>> {
    return this.receiving.receiveMany(scope, inbound);
  }

  /** See ReceiveService.knowsIdentity. */
  knowsIdentity(scope: Scope, who: { channel: Channel; identity: string }): Promise<boolean> {
    return this.receiving.knowsIdentity(scope, who);
  }

  /** See StatusService.applyStatus. */
  applyStatus(scope: Scope, update: StatusUpdate): Promise<Message> {
    return this.statuses.applyStatus(scope, update);
  }

  /** See StatusService.applyProviderStatus. */
  applyProviderStatus(
    scope: Scope,
    report: Parameters<StatusService['applyProviderStatus']>[1],
  ): Promise<Message | null> {
    return this.statuses.applyProviderStatus(scope, report);
  }

  /** See StatusService.applyProviderStatusMany. */
  applyProviderStatusMany(
    scope: Scope,
    reports: Parameters<StatusService['applyProviderStatusMany']>[1],
  ): Promise<Array<'applied' | 'unchanged' | 'unknown'>> {
    return this.statuses.applyProviderStatusMany(scope, reports);
  }

  /** See StatusService.applyStatusMany. */
  applyStatusMany(
    scope: Scope,
    reports: Parameters<StatusService['applyStatusMany']>[1],
  ): ReturnType<StatusService['applyStatusMany']> {
    return this.statuses.applyStatusMany(scope, reports);
  }

  /** See StatusService.applyStatusUpTo. */
  applyStatusUpTo(
    scope: Scope,
    report: Parameters<StatusService['applyStatusUpTo']>[1],
  ): Promise<'applied' | 'unchanged' | 'unknown'> {
    return this.statuses.applyStatusUpTo(scope, report);
  }
}
