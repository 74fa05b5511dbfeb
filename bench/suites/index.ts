import type { Suite } from '../lib/suite.js';
import { broadcastMillionSuite } from './broadcast-million.js';
import { broadcastsSuite } from './broadcasts.js';
import { contactsSuite } from './contacts.js';
import { contactsImportSuite } from './contacts-import.js';
import { contactsMillionSuite } from './contacts-million.js';
import { contactsTableSuite } from './contacts-table.js';
import { inboxLiveSuite } from './inbox-live.js';
import { inboxSuite } from './inbox.js';
import { messagesSuite } from './messages.js';
import { searchSuite } from './search.js';
import { streamsSuite } from './streams.js';
import { webhooksSuite } from './webhooks.js';
import { whatsappBroadcastSuite } from './whatsapp-broadcast.js';
import { whatsappInboundSuite } from './whatsapp-inbound.js';
import { whatsappSendSuite } from './whatsapp-send.js';

/** Every suite, in the order `bench/run.ts` runs them when none is named. */
export const suites: readonly Suite[] = [
  contactsSuite,
  messagesSuite,
  webhooksSuite,
  broadcastsSuite,
  searchSuite,
  whatsappSendSuite,
  whatsappBroadcastSuite,
  whatsappInboundSuite,
  streamsSuite,
  inboxSuite,
  inboxLiveSuite,
  contactsTableSuite,
  contactsImportSuite,
  contactsMillionSuite,
  broadcastMillionSuite,
];
