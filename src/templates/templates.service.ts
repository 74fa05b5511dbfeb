import type { Clock } from '../clock.js';
import type { Db, Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError, Conflict, NotFound } from '../errors.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import { placeholderCount, renderTemplate } from './render.js';
import type { TemplateRow, TemplatesRepository } from './templates.repository.js';
import type { CreateTemplateBody, Template } from './templates.schema.js';

const toTemplate = (r: TemplateRow): Template => ({
  id: r.id,
  name: r.name,
  language: r.language,
  category: r.category as Template['category'],
  body: r.body,
  status: r.status,
  created_at: r.created_at.toISOString(),
});

export class TemplatesService {
  constructor(
    private readonly deps: { tx: Transactor; templates: TemplatesRepository; clock: Clock },
  ) {}

  async create(scope: Scope, input: CreateTemplateBody): Promise<Template> {
    placeholderCount(input.body);
    const now = this.deps.clock.now();
    const row: TemplateRow = {
      account_id: scope.accountId,
      id: newId('tpl'),
      name: input.name,
      language: input.language ?? 'en',
      category: input.category ?? 'utility',
      body: input.body,
      status: 'pending',
      provider_template_id: null,
      rejection_reason: null,
      created_at: now,
      updated_at: now,
    };
    // In a transaction, like every write, so that an idempotent request's record commits with it.
    return this.deps.tx.run(scope, async (trx) => {
      try {
        await this.deps.templates.insert(trx, row);
      } catch (err) {
        if (isUniqueViolation(err, 'templates_name'))
          throw new Conflict(`a template named ${input.name} already exists`);
        throw err;
      }
      return toTemplate(row);
    });
  }

  async get(scope: Scope, id: string): Promise<Template> {
    const row = await this.deps.templates.find(scope.accountId, id);
    if (!row) throw new NotFound('template', id);
    return toTemplate(row);
  }

  async list(scope: Scope, page: PageRequest): Promise<PageResult<Template>> {
    const { rows, total } = await this.deps.templates.list(scope.accountId, page);
    return { data: rows.map(toTemplate), total, page: page.page };
  }

  async delete(scope: Scope, id: string): Promise<{ success: true }> {
    if (!(await this.deps.templates.delete(scope.accountId, id)))
      throw new NotFound('template', id);
    return { success: true };
  }

  /** The provider's verdict; in the sandbox it comes from the review endpoint. */
  async review(scope: Scope, id: string, status: 'approved' | 'rejected'): Promise<Template> {
    return this.deps.tx.run(scope, async (trx) => {
      const row = await this.deps.templates.setStatus(
        scope.accountId,
        id,
        status,
        this.deps.clock.now(),
        trx,
      );
      if (!row) throw new NotFound('template', id);
      return toTemplate(row);
    });
  }

  /**
   * The rendered text of an approved template: unknown name 404, not approved 422,
   * wrong parameter count 422. `fields` name the request fields in errors.
   */
  async renderApproved(
    trx: Tx | Db,
    accountId: string,
    name: string,
    params: string[],
    fields = { name: 'template_name', params: 'template_params' },
  ): Promise<{ content: string; language: string }> {
    const field = fields.name;
    const row = await this.deps.templates.findByName(accountId, name, trx);
    if (!row) throw new NotFound('template', name);
    if (row.status !== 'approved') {
      throw new AppError(
        'validation_error',
        `${field}: template ${name} is ${row.status}, not approved`,
        422,
        [{ field, issue: `template is ${row.status}, not approved` }],
      );
    }
    return { content: renderTemplate(row.body, params, fields.params), language: row.language };
  }
}
