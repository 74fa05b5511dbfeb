import type { Clock } from '../clock.js';
import type { ReadCache } from '../db/read-cache.js';
import type { Db, Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope, Transactor } from '../db/transactor.js';
import type { Outbox } from '../events/outbox.js';
import { AppError, Conflict, NotFound } from '../errors.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type { TemplateStatus } from '../db/schema.js';
import type { TemplateProviderLookup } from './provider-templates.js';
import { placeholderCount, renderTemplate } from './render.js';
import type { TemplateRow, TemplatesRepository } from './templates.repository.js';
import type { CreateTemplateBody, SyncTemplatesResult, Template } from './templates.schema.js';

const toTemplate = (r: TemplateRow): Template => ({
  id: r.id,
  name: r.name,
  language: r.language,
  category: r.category as Template['category'],
  body: r.body,
  status: r.status,
  rejection_reason: r.rejection_reason,
  created_at: r.created_at.toISOString(),
});

const notConnected = () =>
  new AppError(
    'validation_error',
    'templates come from Meta only when the whatsapp channel is connected to whatsapp_cloud',
    422,
    [{ field: 'channel', issue: 'whatsapp is not connected to whatsapp_cloud' }],
  );

/** An approved template as read: its language, and its text with parameters filled in. */
export interface ApprovedTemplate {
  language: string;
  /** 422 naming `paramsField` when the parameters do not fit the body's placeholders. */
  render(params: string[], paramsField?: string): { content: string; language: string };
}

export class TemplatesService {
  constructor(
    private readonly deps: {
      tx: Transactor;
      templates: TemplatesRepository;
      clock: Clock;
      /** `template.updated`, in the transaction of each change Meta or the sandbox makes. */
      outbox: Outbox;
      /**
       * The account's WhatsApp Cloud templates when its whatsapp channel is connected to
       * whatsapp_cloud; absent or null means templates are ours alone (the sandbox reviews them).
       */
      whatsappTemplates?: TemplateProviderLookup;
      /**
       * Approved templates by account and name (every template send reads one), kept correct
       * by the change feed (migration 014) and by this process's own writes once committed.
       */
      cache?: ReadCache<TemplateRow>;
    },
  ) {}

  async create(scope: Scope, input: CreateTemplateBody): Promise<Template> {
    placeholderCount(input.body);
    const language = input.language ?? 'en';
    const category = input.category ?? 'utility';
    let submitted: { providerTemplateId: string; status: TemplateStatus } | null = null;
    const provider = await this.deps.whatsappTemplates?.(scope.accountId);
    if (provider) {
      // Checked before Meta hears of it, so that a name we already use is not submitted.
      if (await this.deps.templates.findByName(scope.accountId, input.name))
        throw new Conflict(`a template named ${input.name} already exists`);
      // Outside the transaction: no connection is held while Meta answers.
      submitted = await provider.submit({ name: input.name, language, category, body: input.body });
    }
    const now = this.deps.clock.now();
    const row: TemplateRow = {
      account_id: scope.accountId,
      id: newId('tpl'),
      name: input.name,
      language,
      category,
      body: input.body,
      status: submitted?.status ?? 'pending',
      provider_template_id: submitted?.providerTemplateId ?? null,
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

  async list(
    scope: Scope,
    page: PageRequest,
    status?: TemplateStatus,
  ): Promise<PageResult<Template>> {
    const { rows, total } = await this.deps.templates.list(scope.accountId, page, status);
    return { data: rows.map(toTemplate), total, page: page.page };
  }

  /**
   * Deletes a template; one of Meta's (submitted or synced, on a WhatsApp connection) is deleted at
   * Meta first, outside any transaction, so that a refusal there deletes nothing here.
   */
  async delete(scope: Scope, id: string): Promise<{ success: true }> {
    const row = await this.deps.templates.find(scope.accountId, id);
    if (!row) throw new NotFound('template', id);
    if (row.provider_template_id !== null) {
      const provider = await this.deps.whatsappTemplates?.(scope.accountId);
      await provider?.remove({ name: row.name, providerTemplateId: row.provider_template_id });
    }
    const name = await this.deps.templates.delete(scope.accountId, id);
    if (name === undefined) throw new NotFound('template', id);
    this.forget(scope.accountId, name);
    return { success: true };
  }

  /**
   * Imports the templates Meta holds for the account's WhatsApp Business Account: a template is
   * matched by Meta's id, else by name (the name is unique in an account); its status, body and
   * category become Meta's. A name we already hold in another language is skipped and reported.
   */
  async sync(scope: Scope): Promise<SyncTemplatesResult> {
    const provider = await this.deps.whatsappTemplates?.(scope.accountId);
    if (!provider) throw notConnected();
    const { templates, skipped } = await provider.list();
    const result: SyncTemplatesResult = {
      created: 0,
      updated: 0,
      unchanged: 0,
      skipped: skipped.map((s) => ({ ...s })),
    };
    const now = this.deps.clock.now();
    // Statuses may change: this process's cached copies go once the import has committed.
    return this.afterCommit(
      this.deps.tx.run(scope, async (trx) => {
        for (const t of templates) {
          const existing =
            (await this.deps.templates.findByProviderId(
              scope.accountId,
              t.providerTemplateId,
              trx,
            )) ?? (await this.deps.templates.findByName(scope.accountId, t.name, trx));
          if (!existing) {
            await this.deps.templates.insert(trx, {
              account_id: scope.accountId,
              id: newId('tpl'),
              name: t.name,
              language: t.language,
              category: t.category,
              body: t.body,
              status: t.status,
              provider_template_id: t.providerTemplateId,
              rejection_reason: t.rejectionReason,
              created_at: now,
              updated_at: now,
            });
            result.created++;
            continue;
          }
          if (existing.name !== t.name || existing.language !== t.language) {
            result.skipped.push({
              name: t.name,
              language: t.language,
              reason: `the name ${existing.name} is already used by a template in ${existing.language}`,
            });
            continue;
          }
          const same =
            existing.status === t.status &&
            existing.body === t.body &&
            existing.category === t.category &&
            existing.provider_template_id === t.providerTemplateId &&
            existing.rejection_reason === t.rejectionReason;
          if (same) {
            result.unchanged++;
            continue;
          }
          const updated = await this.deps.templates.update(
            trx,
            scope.accountId,
            existing.id,
            {
              status: t.status,
              body: t.body,
              category: t.category,
              provider_template_id: t.providerTemplateId,
              rejection_reason: t.rejectionReason,
            },
            now,
          );
          if (updated) await this.recordUpdated(trx, scope, updated);
          result.updated++;
        }
        return result;
      }),
    );
  }

  /**
   * The provider's verdict on a template (WhatsApp's `message_template_status_update` webhook,
   * read by its adapter). Finds the template by the provider's id, else by name and language;
   * answers the updated template, or null when we hold no such template.
   */
  async applyProviderStatus(
    accountId: string,
    update: {
      providerTemplateId: string | null;
      name: string | null;
      language: string | null;
      status: TemplateStatus;
      reason?: string | null;
    },
  ): Promise<Template | null> {
    const { status } = update;
    const scope: Scope = { accountId };
    const template = await this.deps.tx.run(scope, async (trx) => {
      let row = update.providerTemplateId
        ? await this.deps.templates.findByProviderId(accountId, update.providerTemplateId, trx)
        : undefined;
      if (!row && update.name) {
        const byName = await this.deps.templates.findByName(accountId, update.name, trx);
        if (byName && (update.language === null || byName.language === update.language))
          row = byName;
      }
      if (!row) return null;
      const rejectionReason = status === 'rejected' ? (update.reason ?? null) : null;
      const updated = await this.deps.templates.update(
        trx,
        accountId,
        row.id,
        {
          status,
          rejection_reason: rejectionReason,
          ...(row.provider_template_id === null && update.providerTemplateId
            ? { provider_template_id: update.providerTemplateId }
            : {}),
        },
        this.deps.clock.now(),
      );
      if (!updated) return null;
      // A report repeating what we hold changes nothing anyone sees: no event.
      if (row.status !== status || row.rejection_reason !== rejectionReason)
        await this.recordUpdated(trx, scope, updated);
      return updated;
    });
    if (template) this.forget(accountId, template.name);
    return template ? toTemplate(template) : null;
  }

  /** The provider's verdict; in the sandbox it comes from the review endpoint. */
  async review(scope: Scope, id: string, status: 'approved' | 'rejected'): Promise<Template> {
    const current = await this.deps.templates.find(scope.accountId, id);
    if (!current) throw new NotFound('template', id);
    if (current.provider_template_id !== null) {
      throw new AppError(
        'validation_error',
        `template ${id} is reviewed by Meta: its status comes from Meta, not from the sandbox`,
        422,
        [{ field: 'id', issue: 'the template was submitted to Meta' }],
      );
    }
    const template = await this.deps.tx.run(scope, async (trx) => {
      const row = await this.deps.templates.setStatus(
        scope.accountId,
        id,
        status,
        this.deps.clock.now(),
        trx,
      );
      if (!row) throw new NotFound('template', id);
      if (current.status !== status || current.rejection_reason !== row.rejection_reason)
        await this.recordUpdated(trx, scope, row);
      return toTemplate(row);
    });
    this.forget(scope.accountId, current.name);
    return template;
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
    const approved = await this.findApproved(trx, accountId, name, fields.name);
    return approved.render(params, fields.params);
  }

  /**
   * An approved template, ready to render with any parameters (a group of sends using one
   * template reads it once): unknown name 404, not approved 422.
   */
  async findApproved(
    trx: Tx | Db,
    accountId: string,
    name: string,
    field = 'template_name',
  ): Promise<ApprovedTemplate> {
    const row = await this.byName(trx, accountId, name);
    if (!row) throw new NotFound('template', name);
    if (row.status !== 'approved') {
      throw new AppError(
        'validation_error',
        `${field}: template ${name} is ${row.status}, not approved`,
        422,
        [{ field, issue: `template is ${row.status}, not approved` }],
      );
    }
    return {
      language: row.language,
      render: (params, paramsField = 'template_params') => ({
        content: renderTemplate(row.body, params, paramsField),
        language: row.language,
      }),
    };
  }

  /**
   * The template by name: an approved one from the cache when it holds it; any other is read
   * from the database each time (so that its approval is seen at once) and not kept.
   */
  private async byName(trx: Tx | Db, accountId: string, name: string) {
    const cache = this.deps.cache;
    if (!cache) return this.deps.templates.findByName(accountId, name, trx);
    let unapproved: TemplateRow | undefined;
    const approved = await cache.get(`${accountId} ${name}`, async () => {
      const row = await this.deps.templates.findByName(accountId, name, trx);
      if (row?.status === 'approved') return row;
      unapproved = row;
      return undefined;
    });
    return approved ?? unapproved;
  }

  /** `template.updated` with the template as the API returns it, in the change's transaction. */
  private async recordUpdated(trx: Tx, scope: Scope, row: TemplateRow): Promise<void> {
    await this.deps.outbox.record(
      trx,
      scope.accountId,
      'template.updated',
      toTemplate(row),
      scope.actor,
    );
  }

  /** This process's cached copy goes at once (other processes hear of it from the feed). */
  private forget(accountId: string, name: string): void {
    this.deps.cache?.invalidate(`${accountId} ${name}`);
  }

  /** Empties this process's cache once `change` has committed (or failed). */
  private async afterCommit<T>(change: Promise<T>): Promise<T> {
    try {
      return await change;
    } finally {
      this.deps.cache?.clear();
    }
  }
}
