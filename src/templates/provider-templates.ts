import type { TEMPLATE_CATEGORIES } from './templates.schema.js';
import type { TemplateCategory, WhatsAppTemplateApi } from '../channels/provider-templates.js';

export type {
  ProviderTemplate,
  TemplateCategory,
  WhatsAppTemplateApi,
} from '../channels/provider-templates.js';

/** The adapter's categories are the API's: this fails to compile when the two lists differ. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Holds<T extends true> = T;
export type CategoriesAgree = Holds<Same<TemplateCategory, (typeof TEMPLATE_CATEGORIES)[number]>>;

/** The account's template provider, or null when templates are ours alone (sandbox). */
export type TemplateProviderLookup = (accountId: string) => Promise<WhatsAppTemplateApi | null>;
