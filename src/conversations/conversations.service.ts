import { WINDOWED_CHANNELS } from '../channels/channel.js';
import type { Clock } from '../clock.js';
import type { Contact } from '../contacts/contacts.schema.js';
import type { ContactsService } from '../contacts/contacts.service.js';
import type { Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import { PRESENCE_TTL_MS, type Presence } from '../events/presence.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type { MessageRow, MessagesRepository } from '../messages/messages.repository.js';
import { toMessage } from '../messages/messages.present.js';
import { CUSTOMER_WINDOW_MS } from '../messages/window.js';
import type { UsersRepository } from '../users/users.repository.js';
import type {
  ConversationFilter,
  ConversationRow,
  ConversationsRepository,
  NoteRow,
} from './conversations.repository.js';
import type {
  AssignBody,
  Conversation,
  ListNotesQuery,
  MessageHistory,
  Note,
  NoteHistory,
} from './conversations.schema.js';

const toNote = (r: NoteRow): Note => ({
  id: r.id,
  conversation_id: r.conversation_id,
  content: r.content,
  author: r.author ?? null,
  created_at: r.created_at.toISOString(),
});

export class ConversationsService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      conversations: ConversationsRepository;
      messages: MessagesRepository;
      users: UsersRepository;
      /** The contacts a conversation shows, read as `GET /v1/contacts/{id}` reads them. */
      contacts: Pick<ContactsService, 'findMany'>;
      outbox: Outbox;
      clock: Clock;
      /** Where `presence.updated` goes (the live streams). */
      presence: Pick<Presence, 'publish'>;
    },
  ) {}

  /**
   * Says on the live streams, for 30 seconds, that the signed-in user is viewing or typing in
   * the conversation. An API key has no user to show: a 422.
   */
  async presence(scope: Scope, id: string, state: 'viewing' | 'typing'): Promise<void> {
    if (!scope.actor)
      throw new ValidationError('state', "presence is a signed-in user's; an API key has none");
    if (!(await this.deps.conversations.find(scope.accountId, id)))
      throw new NotFound('conversation', id);
    await this.deps.presence.publish(scope.accountId, {
      conversation_id: id,
      user: { id: scope.actor.id, name: scope.actor.name },
      state,
      expires_at: new Date(this.deps.clock.now().getTime() + PRESENCE_TTL_MS).toISOString(),
    });
  }

  /**
   * Conversations as the API shows them: assignee names, contacts, newest messages and unread
   * counts each looked up in one go.
   */
  async present(accountId: string, rows: ConversationRow[], trx?: Tx): Promise<Conversation[]> {
    const userIds = rows.filter((r) => r.assignee_type === 'user').map((r) => r.assignee_id!);
    const teamIds = rows.filter((r) => r.assignee_type === 'team').map((r) => r.assignee_id!);
    const [names, contacts, summaries] = await Promise.all([
      this.deps.users.namesOf(accountId, userIds, teamIds),
      this.deps.contacts.findMany(
        { accountId },
        rows.map((r) => r.contact_id),
      ),
      this.deps.conversations.summaries(
        accountId,
        rows.map((r) => r.id),
        trx,
      ),
    ]);
    const now = this.deps.clock.now();
    return rows.map((r) => {
      const summary = summaries.get(r.id);
      const last = summary?.last_message ?? null;
      return {
        id: r.id,
        contact_id: r.contact_id,
        channel: r.channel,
        status: r.status,
        assigned_to:
          r.assignee_type && r.assignee_id
            ? { type: r.assignee_type, id: r.assignee_id, name: names.get(r.assignee_id) ?? '' }
            : null,
        contact: contactOf(contacts.get(r.contact_id)),
        last_message: last && {
          id: last.id,
          direction: last.direction,
          type: last.type,
          preview: previewOf(last.type, last.content),
          status: last.status,
          created_at: new Date(last.created_at).toISOString(),
        },
        unread_count: summary?.unread_count ?? 0,
        last_read_at: r.last_read_at?.toISOString() ?? null,
        window_expires_at: windowExpiresAt(r.channel, r.last_inbound_at, now),
        messages: [],
        created_at: r.created_at.toISOString(),
        updated_at: r.updated_at.toISOString(),
      };
    });
  }

  /**
   * Marks the conversation read for the team (its unread count goes to 0) with
   * `conversation.read`; one with nothing unread is answered as it is, with no event.
   */
  async read(scope: Scope, id: string): Promise<Conversation> {
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.conversations.lock(trx, scope.accountId, id);
      if (!current) throw new NotFound('conversation', id);
      const row = await this.deps.conversations.markRead(
        trx,
        scope.accountId,
        id,
        this.deps.clock.now(),
      );
      const [conversation] = await this.present(scope.accountId, [row ?? current], trx);
      if (row)
        await this.deps.outbox.record(
          trx,
          scope.accountId,
          'conversation.read',
          conversation!,
          scope.actor,
        );
      return conversation!;
    });
  }

  /**
   * A page of conversations, newest activity first. `view=mine` is a signed-in user's own
   * conversations: an API key has no user, so it is a 422 there.
   */
  async list(
    scope: Scope,
    filter: ConversationFilter,
    page: PageRequest,
    view: 'all' | 'mine' | 'unassigned' = 'all',
  ): Promise<PageResult<Conversation>> {
    if (view === 'mine' && !scope.actor)
      throw new ValidationError('view', 'mine needs a signed-in user; an API key has no "mine"');
    const { rows, total } = await this.deps.conversations.list(
      scope.accountId,
      {
        ...filter,
        unassigned: view === 'unassigned',
        ...(view === 'mine' && { mine: scope.actor!.id }),
      },
      page,
    );
    return { data: await this.present(scope.accountId, rows), total, page: page.page };
  }

  async get(scope: Scope, id: string): Promise<Conversation> {
    const row = await this.deps.conversations.find(scope.accountId, id);
    if (!row) throw new NotFound('conversation', id);
    const [[conversation], messages] = await Promise.all([
      this.present(scope.accountId, [row]),
      this.deps.messages.listForConversation(scope.accountId, id),
    ]);
    return { ...conversation!, messages: messages.map(toMessage) };
  }

  /**
   * A page of the conversation's messages, newest first, older than `before` (a message of this
   * conversation, else a 404): a client opens a long conversation by its last page and loads
   * older ones as it scrolls.
   */
  async history(
    scope: Scope,
    id: string,
    query: { before?: string; limit?: number },
  ): Promise<MessageHistory> {
    let before: MessageRow | undefined;
    if (query.before !== undefined) {
      before = await this.deps.messages.find(scope.accountId, query.before);
      if (!before || before.conversation_id !== id) {
        if (!(await this.deps.conversations.find(scope.accountId, id)))
          throw new NotFound('conversation', id);
        throw new NotFound('message', query.before);
      }
    }
    const { rows, hasMore } = await this.deps.messages.historyPage(
      scope.accountId,
      id,
      before ?? null,
      query.limit ?? 50,
    );
    // A message of the account's in it (the page's, or `before`) shows that the conversation is
    // the account's; only an empty first page needs to look for the conversation itself.
    if (rows.length === 0 && !before && !(await this.deps.conversations.find(scope.accountId, id)))
      throw new NotFound('conversation', id);
    return { data: rows.map(toMessage), has_more: hasMore };
  }

  /** Assigns to exactly one user or team; reopens a resolved conversation. */
  async assign(scope: Scope, id: string, body: AssignBody): Promise<Conversation> {
    if ((body.user_id === undefined) === (body.team_id === undefined)) {
      throw new ValidationError(
        body.user_id === undefined ? 'user_id' : 'team_id',
        'give exactly one of user_id and team_id',
      );
    }
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.conversations.lock(trx, scope.accountId, id);
      if (!current) throw new NotFound('conversation', id);
      const [type, assigneeId] =
        body.user_id !== undefined
          ? (['user', body.user_id] as const)
          : (['team', body.team_id!] as const);
      const exists =
        type === 'user'
          ? await this.deps.users.findUser(scope.accountId, assigneeId, trx)
          : await this.deps.users.findTeam(scope.accountId, assigneeId, trx);
      if (!exists) throw new NotFound(type, assigneeId);
      const row = await this.deps.conversations.update(trx, scope.accountId, id, {
        assignee_type: type,
        assignee_id: assigneeId,
        status: 'open',
        updated_at: this.deps.clock.now(),
      });
      const [conversation] = await this.present(scope.accountId, [row], trx);
      await this.deps.outbox.record(
        trx,
        scope.accountId,
        'conversation.assigned',
        conversation!,
        scope.actor,
      );
      return conversation!;
    });
  }

  /** Resolving a resolved conversation changes nothing and emits nothing. */
  async resolve(scope: Scope, id: string): Promise<Conversation> {
    return this.change(scope, id, 'conversation.resolved', (current) =>
      current.status === 'resolved' ? null : { status: 'resolved' },
    );
  }

  /** Reopening an open conversation changes nothing and emits nothing. */
  async reopen(scope: Scope, id: string): Promise<Conversation> {
    return this.change(scope, id, 'conversation.reopened', (current) =>
      current.status === 'open' ? null : { status: 'open' },
    );
  }

  /** Unassigning an unassigned conversation changes nothing and emits nothing. */
  async unassign(scope: Scope, id: string): Promise<Conversation> {
    return this.change(scope, id, 'conversation.unassigned', (current) =>
      current.assignee_id === null ? null : { assignee_type: null, assignee_id: null },
    );
  }

  /**
   * Open conversations in each view: `unassigned` and `all` of the account (on one channel when
   * given); `mine` is a signed-in user's own, so null for an API key.
   */
  async counts(
    scope: Scope,
    channel: Channel | undefined,
  ): Promise<{ mine: number | null; unassigned: number; all: number }> {
    return this.deps.conversations.openCounts(scope.accountId, channel, scope.actor?.id ?? null);
  }

  /**
   * Unassigns every conversation of a user or team that is going, each with its
   * `conversation.unassigned` event, in the caller's transaction (see UsersService).
   */
  async release(
    trx: Tx,
    scope: Scope,
    assignee: { type: 'user' | 'team'; id: string },
  ): Promise<void> {
    const rows = await this.deps.conversations.unassignAll(
      trx,
      scope.accountId,
      assignee,
      this.deps.clock.now(),
    );
    const conversations = await this.present(scope.accountId, rows, trx);
    await this.deps.outbox.recordMany(
      trx,
      scope.accountId,
      conversations.map((data) => ({
        type: 'conversation.unassigned' as const,
        data,
        actor: scope.actor,
      })),
    );
  }

  /**
   * Locks the conversation and applies what `patch` asks of it as it stands, with its event in
   * the same transaction; a null patch (nothing to change) answers it as it is, with no event.
   */
  private async change(
    scope: Scope,
    id: string,
    event: 'conversation.resolved' | 'conversation.reopened' | 'conversation.unassigned',
    patch: (
      current: ConversationRow,
    ) => Partial<Pick<ConversationRow, 'status' | 'assignee_type' | 'assignee_id'>> | null,
  ): Promise<Conversation> {
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.conversations.lock(trx, scope.accountId, id);
      if (!current) throw new NotFound('conversation', id);
      const changes = patch(current);
      if (changes === null) return (await this.present(scope.accountId, [current], trx))[0]!;
      const row = await this.deps.conversations.update(trx, scope.accountId, id, {
        ...changes,
        updated_at: this.deps.clock.now(),
      });
      const [conversation] = await this.present(scope.accountId, [row], trx);
      await this.deps.outbox.record(trx, scope.accountId, event, conversation!, scope.actor);
      return conversation!;
    });
  }

  /**
   * Notes are for the team only: never sent, never among the messages. Its `note.created` is
   * written in the note's transaction.
   */
  async addNote(scope: Scope, conversationId: string, content: string): Promise<Note> {
    return this.deps.tx.run(scope, async (trx) => {
      if (!(await this.deps.conversations.find(scope.accountId, conversationId, trx)))
        throw new NotFound('conversation', conversationId);
      const row: NoteRow = {
        account_id: scope.accountId,
        id: newId('note'),
        conversation_id: conversationId,
        content,
        author: scope.actor ?? null,
        created_at: this.deps.clock.now(),
      };
      await this.deps.conversations.insertNote(trx, row);
      const note = toNote(row);
      await this.deps.outbox.record(trx, scope.accountId, 'note.created', note, scope.actor);
      return note;
    });
  }

  async listNotes(
    scope: Scope,
    conversationId: string,
    page: PageRequest,
  ): Promise<PageResult<Note>> {
    if (!(await this.deps.conversations.find(scope.accountId, conversationId)))
      throw new NotFound('conversation', conversationId);
    const { rows, total } = await this.deps.conversations.listNotes(
      scope.accountId,
      conversationId,
      page,
    );
    return { data: rows.map(toNote), total, page: page.page };
  }

  /**
   * `GET /conversations/{id}/notes`: a page of notes, oldest first; with `before`, the notes
   * older than that one, newest first (as the message history pages).
   */
  notes(
    scope: Scope,
    conversationId: string,
    query: ListNotesQuery,
  ): Promise<PageResult<Note> | NoteHistory> {
    const { before, page, limit } = query;
    if (before === undefined)
      return this.listNotes(scope, conversationId, { page: page ?? 1, limit: limit ?? 20 });
    if (page !== undefined) throw new ValidationError('page', 'is not allowed with before');
    return this.notesBefore(scope, conversationId, before, limit);
  }

  /** The notes older than `before` (a note of this conversation, else a 404), newest first. */
  private async notesBefore(
    scope: Scope,
    conversationId: string,
    before: string,
    limit = 50,
  ): Promise<NoteHistory> {
    if (!(await this.deps.conversations.find(scope.accountId, conversationId)))
      throw new NotFound('conversation', conversationId);
    const note = await this.deps.conversations.findNote(scope.accountId, before);
    if (!note || note.conversation_id !== conversationId) throw new NotFound('note', before);
    const page = await this.deps.conversations.notesBefore(
      scope.accountId,
      conversationId,
      note,
      limit,
    );
    return { data: page.rows.map(toNote), has_more: page.hasMore };
  }
}

/** At most 140 characters of a message's text, whitespace folded; its kind when it has none. */
function previewOf(type: string, content: string | null): string {
  const text = (content ?? '').replace(/\s+/g, ' ').trim();
  if (text === '') return `[${type}]`;
  return text.length <= 140 ? text : `${text.slice(0, 139)}…`;
}

/** What a conversation shows of its contact; null once the contact was deleted. */
function contactOf(contact: Contact | undefined): Conversation['contact'] {
  if (!contact) return null;
  const { id, name, phone, email, identities } = contact;
  return { id, name, phone, email, identities };
}

/** When the 24-hour window closes, on a windowed channel whose contact wrote in the last day. */
function windowExpiresAt(channel: Channel, lastInboundAt: Date | null, now: Date): string | null {
  if (!WINDOWED_CHANNELS.has(channel) || lastInboundAt === null) return null;
  const closes = lastInboundAt.getTime() + CUSTOMER_WINDOW_MS;
  return closes > now.getTime() ? new Date(closes).toISOString() : null;
}
