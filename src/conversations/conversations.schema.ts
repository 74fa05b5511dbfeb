import { Type, type Static } from 'typebox';
import { Contact } from '../contacts/contacts.schema.js';
import { ChannelSchema, Message } from '../messages/messages.schema.js';
import { AuthorSchema, MAX_PAGE, Nullable, PageQuery, Timestamp } from '../http/schemas.js';

export const Assignee = Type.Object({
  type: Type.Union([Type.Literal('user'), Type.Literal('team')]),
  id: Type.String(),
  name: Type.String(),
});

export const ConversationContact = Type.Pick(
  Contact,
  ['id', 'name', 'phone', 'email', 'identities'],
  {
    description:
      'The contact as GET /v1/contacts/{id} shows it, its list fields only; null once the contact was deleted.',
  },
);

export const LastMessage = Type.Object(
  {
    id: Type.String(),
    direction: Type.Union([Type.Literal('inbound'), Type.Literal('outbound')]),
    type: Type.String(),
    preview: Type.String({
      description:
        'The text, whitespace folded, cut to 140 characters; `[image]`, `[document]` or `[template]` when it has none.',
    }),
    status: Type.String(),
    created_at: Timestamp,
  },
  { description: 'The newest message, for a list to show; null in a conversation without one.' },
);

export const Conversation = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `conv_`.' }),
    contact_id: Type.String(),
    channel: ChannelSchema,
    status: Type.Union([Type.Literal('open'), Type.Literal('resolved')]),
    assigned_to: Nullable(Assignee),
    contact: Nullable(ConversationContact),
    last_message: Nullable(LastMessage),
    unread_count: Type.Integer({
      description: 'Inbound messages after last_read_at (all of them before the first read).',
    }),
    last_read_at: Nullable(Timestamp, { description: 'When the team last marked it read.' }),
    window_expires_at: Nullable(Timestamp, {
      description:
        'When the 24-hour window to reply freely closes, on whatsapp, messenger and instagram; null when it is closed, and on webchat.',
    }),
    messages: Type.Array(Message, {
      description: 'Oldest first; complete on the single-conversation read, empty elsewhere.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'Conversation' },
);
export type Conversation = Static<typeof Conversation>;

export const ListConversationsQuery = Type.Object(
  {
    ...PageQuery,
    status: Type.Optional(
      Type.Union([Type.Literal('open'), Type.Literal('resolved'), Type.Literal('all')], {
        default: 'open',
      }),
    ),
    channel: Type.Optional(ChannelSchema),
    assigned_to: Type.Optional(
      Type.String({ minLength: 1, description: 'A user id or a team id.' }),
    ),
    view: Type.Optional(
      Type.Union([Type.Literal('all'), Type.Literal('mine'), Type.Literal('unassigned')], {
        description:
          "An inbox view: `all`, `unassigned` (assigned to nobody), or `mine` (the signed-in user's; a 422 with an API key).",
      }),
    ),
    sort: Type.Optional(
      Type.Literal('last_activity', {
        description: 'Newest activity first (the order of every list).',
      }),
    ),
    contact_id: Type.Optional(Type.String({ minLength: 1, description: "One contact's." })),
    q: Type.Optional(
      Type.String({
        maxLength: 100,
        description:
          'Search by contact: the start of any word of its name, or the start of its phone (digits, whatever the spacing), email or an identity, ignoring case. Several words must each start a word of the name.',
        examples: ['ada lov'],
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListConversationsQuery = Static<typeof ListConversationsQuery>;

export const AssignBody = Type.Object(
  {
    user_id: Type.Optional(Type.String({ minLength: 1 })),
    team_id: Type.Optional(Type.String({ minLength: 1 })),
  },
  { additionalProperties: false, description: 'Exactly one of user_id and team_id.' },
);
export type AssignBody = Static<typeof AssignBody>;

export const Note = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `note_`.' }),
    conversation_id: Type.String(),
    content: Type.String(),
    author: AuthorSchema,
    created_at: Timestamp,
  },
  { $id: 'Note' },
);
export type Note = Static<typeof Note>;

export const CreateNoteBody = Type.Object(
  { content: Type.String({ minLength: 1, maxLength: 10_000 }) },
  { additionalProperties: false },
);

export const ListNotesQuery = Type.Object(
  {
    page: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: MAX_PAGE,
        description: 'Page number, from 1 (default 1); not with `before` (a 422).',
      }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        description: 'Page size, 1–100: default 20 by page, 50 with `before`.',
      }),
    ),
    before: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'A note of this conversation (`note_…`): the answer is `{ data, has_more }`, the notes older than it, newest first.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListNotesQuery = Static<typeof ListNotesQuery>;

/** The notes with `before`: a slice of the history, as the message history pages. */
export interface NoteHistory {
  data: Note[];
  has_more: boolean;
}

/** Either answer of the notes list, in one schema (a union would hold `Note` twice). */
export const NotesPage = Type.Object(
  {
    data: Type.Array(Note, { description: 'Oldest first by page; newest first with `before`.' }),
    total: Type.Optional(Type.Integer({ minimum: 0, description: 'By page only.' })),
    page: Type.Optional(Type.Integer({ minimum: 1, description: 'By page only.' })),
    has_more: Type.Optional(
      Type.Boolean({
        description: 'With `before` only: whether older notes remain before the last one.',
      }),
    ),
  },
  { $id: 'NotesPage' },
);

export const ListMessagesQuery = Type.Object(
  {
    before: Type.Optional(
      Type.String({
        minLength: 1,
        description: 'A message of this conversation (`msg_…`): the page holds older ones.',
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
  },
  { additionalProperties: false },
);
export type ListMessagesQuery = Static<typeof ListMessagesQuery>;

export const MessageHistory = Type.Object(
  {
    data: Type.Array(Message, { description: 'Newest first.' }),
    has_more: Type.Boolean({ description: 'Whether older messages remain before the last one.' }),
  },
  { $id: 'MessageHistory' },
);
export type MessageHistory = Static<typeof MessageHistory>;

export const ConversationCountsQuery = Type.Object(
  { channel: Type.Optional(ChannelSchema) },
  { additionalProperties: false },
);

export const ConversationCounts = Type.Object(
  {
    mine: Nullable(Type.Integer(), {
      description: 'Open conversations assigned to the signed-in user; null for an API key.',
    }),
    unassigned: Type.Integer({ description: 'Open conversations assigned to nobody.' }),
    all: Type.Integer({ description: 'Open conversations.' }),
  },
  { $id: 'ConversationCounts' },
);

export const PresenceBody = Type.Object(
  {
    state: Type.Union([Type.Literal('viewing'), Type.Literal('typing')], {
      description: 'Shown to the other agents for 30 seconds; repeat it to keep it shown.',
    }),
  },
  { additionalProperties: false, examples: [{ state: 'typing' }] },
);
