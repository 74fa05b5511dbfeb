import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { pageRequest } from '../http/pagination.js';
import { IdParams, Page, errorResponses } from '../http/schemas.js';
import type { ConversationsService } from './conversations.service.js';
import {
  AssignBody,
  Conversation,
  ConversationCounts,
  ConversationCountsQuery,
  CreateNoteBody,
  ListConversationsQuery,
  ListMessagesQuery,
  ListNotesQuery,
  MessageHistory,
  Note,
  NotesPage,
  PresenceBody,
} from './conversations.schema.js';

export function conversationsRoutes(
  app: FastifyInstance,
  conversations: ConversationsService,
): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Conversations'];

  r.get('/conversations', {
    schema: {
      tags,
      operationId: 'listConversations',
      summary: 'List conversations, most recent activity first',
      querystring: ListConversationsQuery,
      response: { 200: Page(Conversation), ...errorResponses(422) },
    },
    handler: (req) =>
      conversations.list(
        req.scope,
        {
          status: req.query.status ?? 'open',
          channel: req.query.channel,
          assignedTo: req.query.assigned_to,
          contactId: req.query.contact_id,
          q: req.query.q,
        },
        pageRequest(req.query),
        req.query.view ?? 'all',
      ),
  });
  r.get('/conversations/counts', {
    schema: {
      tags,
      operationId: 'countConversations',
      summary: 'Count open conversations in each inbox view',
      querystring: ConversationCountsQuery,
      response: { 200: ConversationCounts, ...errorResponses(422) },
    },
    handler: (req) => conversations.counts(req.scope, req.query.channel),
  });
  r.get('/conversations/:id', {
    schema: {
      tags,
      operationId: 'getConversation',
      summary: 'Get a conversation with its full message history',
      params: IdParams,
      response: { 200: Conversation, ...errorResponses(404) },
    },
    handler: (req) => conversations.get(req.scope, req.params.id),
  });
  r.get('/conversations/:id/messages', {
    schema: {
      tags,
      operationId: 'listConversationMessages',
      summary: 'Page through the message history, newest first',
      description:
        'Up to `limit` messages (1–100, default 50), newest first; with `before` (a message of ' +
        'this conversation) the ones older than it. `has_more` says whether older ones remain: ' +
        'pass the last message of the page as the next `before`. A conversation of any length ' +
        'opens as fast as a short one. A `before` that is not a message of this conversation is ' +
        'a 404.',
      params: IdParams,
      querystring: ListMessagesQuery,
      response: { 200: MessageHistory, ...errorResponses(404, 422) },
    },
    handler: (req) => conversations.history(req.scope, req.params.id, req.query),
  });
  r.post('/conversations/:id/assign', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'assignConversation',
      summary: 'Assign to a user or a team (reopens a resolved conversation)',
      params: IdParams,
      body: AssignBody,
      response: { 200: Conversation, ...errorResponses(404, 422) },
    },
    handler: (req) => conversations.assign(req.scope, req.params.id, req.body),
  });
  r.post('/conversations/:id/resolve', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'resolveConversation',
      summary: 'Mark resolved',
      params: IdParams,
      response: { 200: Conversation, ...errorResponses(404) },
    },
    handler: (req) => conversations.resolve(req.scope, req.params.id),
  });
  r.post('/conversations/:id/reopen', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'reopenConversation',
      summary: 'Open a resolved conversation again (an open one is answered as it is)',
      params: IdParams,
      response: { 200: Conversation, ...errorResponses(404) },
    },
    handler: (req) => conversations.reopen(req.scope, req.params.id),
  });
  r.post('/conversations/:id/unassign', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'unassignConversation',
      summary: 'Remove the assignee (an unassigned conversation is answered as it is)',
      params: IdParams,
      response: { 200: Conversation, ...errorResponses(404) },
    },
    handler: (req) => conversations.unassign(req.scope, req.params.id),
  });
  r.post('/conversations/:id/read', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'readConversation',
      summary:
        'Mark read for the team (unread_count 0; conversation.read when anything was unread)',
      params: IdParams,
      response: { 200: Conversation, ...errorResponses(404) },
    },
    handler: (req) => conversations.read(req.scope, req.params.id),
  });
  r.post('/conversations/:id/presence', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'reportPresence',
      summary:
        'Tell the other agents, on the live stream, that you are viewing or typing (a session only; 30 s)',
      params: IdParams,
      body: PresenceBody,
      response: { 204: Type.Null(), ...errorResponses(404, 422) },
    },
    handler: async (req, reply) => {
      await conversations.presence(req.scope, req.params.id, req.body.state);
      return reply.code(204).send(null);
    },
  });
  r.post('/conversations/:id/notes', {
    config: { access: 'agent', successStatus: 201 },
    schema: {
      tags,
      operationId: 'createNote',
      summary: 'Add an internal note (never sent to the contact)',
      params: IdParams,
      body: CreateNoteBody,
      response: { 201: Note, ...errorResponses(404, 422) },
    },
    handler: async (req, reply) =>
      reply.code(201).send(await conversations.addNote(req.scope, req.params.id, req.body.content)),
  });
  r.get('/conversations/:id/notes', {
    schema: {
      tags,
      operationId: 'listNotes',
      summary: 'List internal notes: oldest first by page, or newest first before a note',
      description:
        'Without `before`: a page of notes, oldest first (`page`, `limit`). With `before` (a note ' +
        'of this conversation, else a 404): up to `limit` notes older than it (1–100, default ' +
        '50), newest first, as `{ data, has_more }`, the way the message history pages; `page` ' +
        'with `before` is a 422.',
      params: IdParams,
      querystring: ListNotesQuery,
      response: {
        200: NotesPage,
        ...errorResponses(404, 422),
      },
    },
    handler: (req) => conversations.notes(req.scope, req.params.id, req.query),
  });
}
