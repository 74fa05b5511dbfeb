import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { IdParams, Page, Success, errorResponses } from '../http/schemas.js';
import { pageRequest } from '../http/pagination.js';
import type { ContactsService } from './contacts.service.js';
import {
  Contact,
  CreateContactBody,
  LifecycleBody,
  ListContactsQuery,
  MergeContactBody,
  ListTagsQuery,
  Tag,
  UpdateContactBody,
} from './contacts.schema.js';

export function contactsRoutes(app: FastifyInstance, contacts: ContactsService): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Contacts'];

  r.get('/contacts', {
    schema: {
      tags,
      operationId: 'listContacts',
      summary: 'List contacts, newest first',
      querystring: ListContactsQuery,
      response: { 200: Page(Contact), ...errorResponses(422) },
    },
    handler: (req) =>
      contacts.list(
        req.scope,
        {
          tag: req.query.tag,
          search: req.query.search,
          lifecycle_stage: req.query.lifecycle_stage,
          channel: req.query.channel,
        },
        pageRequest(req.query),
      ),
  });

  r.post('/contacts', {
    config: { access: 'agent', successStatus: 201 },
    schema: {
      tags,
      operationId: 'createContact',
      summary: 'Create a contact',
      body: CreateContactBody,
      response: { 201: Contact, ...errorResponses(409, 422) },
    },
    handler: async (req, reply) => reply.code(201).send(await contacts.create(req.scope, req.body)),
  });

  r.get('/contacts/:id', {
    schema: {
      tags,
      operationId: 'getContact',
      summary: 'Get a contact',
      params: IdParams,
      response: { 200: Contact, ...errorResponses(404) },
    },
    handler: (req) => contacts.get(req.scope, req.params.id),
  });

  r.put('/contacts/:id', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'updateContact',
      summary:
        'Update a contact (omitted fields keep their values; tags replaced; custom_fields merged)',
      params: IdParams,
      body: UpdateContactBody,
      response: { 200: Contact, ...errorResponses(404, 409, 422) },
    },
    handler: (req) => contacts.update(req.scope, req.params.id, req.body),
  });

  r.delete('/contacts/:id', {
    schema: {
      tags,
      operationId: 'deleteContact',
      summary: 'Delete a contact permanently',
      params: IdParams,
      response: { 200: Success, ...errorResponses(404) },
    },
    handler: (req) => contacts.delete(req.scope, req.params.id),
  });

  r.post('/contacts/:id/lifecycle', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'setContactLifecycle',
      summary: "Set a contact's lifecycle stage",
      params: IdParams,
      body: LifecycleBody,
      response: { 200: Contact, ...errorResponses(404, 422) },
    },
    handler: (req) => contacts.setLifecycle(req.scope, req.params.id, req.body.lifecycle_stage),
  });

  r.post('/contacts/:id/merge', {
    config: { access: 'agent' },
    schema: {
      tags,
      operationId: 'mergeContact',
      summary: 'Merge another contact into this one (the same person met on two channels)',
      description:
        "The other contact's identities, conversations (with their messages and notes) and tags move to this contact; its custom fields fill the keys this one lacks (this contact's values win); a missing phone, name or email is taken from it; then it is deleted (its id answers 404). 409 when both contacts have an identity on one channel (two phones, two PSIDs). When both have a conversation on one channel (possible through the sandbox without identities), the other's conversation is folded into this contact's: its messages and notes move there, and it stays open if either was. One transaction; no event is emitted.",
      params: IdParams,
      body: MergeContactBody,
      response: { 200: Contact, ...errorResponses(404, 409, 422) },
    },
    handler: (req) => contacts.merge(req.scope, req.params.id, req.body.contact_id),
  });

  r.get('/tags', {
    schema: {
      tags: ['Tags'],
      operationId: 'listTags',
      summary: "List the account's tags",
      querystring: ListTagsQuery,
      response: { 200: Page(Tag), ...errorResponses(422) },
    },
    handler: (req) => contacts.listTags(req.scope, pageRequest(req.query)),
  });
}
