import type { TemplateStatus } from '../db/schema.js';
import type { TEMPLATE_CATEGORIES } from './templates.schema.js';

export type TemplateCategory = (typeof TEMPLATE_CATEGORIES)[number];

/** A template as the provider holds it, in our vocabulary. */
export interface ProviderTemplate {
  providerTemplateId: string;
  name: string;
  language: string;
  category: TemplateCategory;
  body: string;
  status: TemplateStatus;
  rejectionReason: string | null;
}

/**
 * The templates of a provider that keeps its own (WhatsApp Cloud: the business account's message
 * templates). Implementations translate the vendor's refusals into AppErrors: a refusal of the
 * template is a 422, a temporary fault a 503.
 */
export interface WhatsAppTemplateApi {
  /** Submits a template for the provider's review. */
  submit(template: {
    name: string;
    language: string;
    category: TemplateCategory;
    body: string;
  }): Promise<{ providerTemplateId: string; status: TemplateStatus; category: TemplateCategory }>;
  /**
   * Deletes the template at the provider (that one language of it). One the provider no longer
   * holds counts as deleted.
   */
  remove(template: { name: string; providerTemplateId: string }): Promise<void>;
  /** Every template the provider holds; those we cannot represent are listed with the reason. */
  list(): Promise<{
    templates: ProviderTemplate[];
    skipped: Array<{ name: string; language: string; reason: string }>;
  }>;
}

/** The account's template provider, or null when templates are ours alone (sandbox). */
export type TemplateProviderLookup = (accountId: string) => Promise<WhatsAppTemplateApi | null>;
