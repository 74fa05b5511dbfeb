// The resources the app shows, as the OpenAPI document names them, and the few the document
// does not carry yet (sessions, presence, uploads: DESIGN §5, being built on main).
import type { components, paths } from './openapi.js';

type Schemas = components['schemas'];
export type Conversation = Schemas['Conversation'];
export type Message = Schemas['Message'] & { author?: Author | null };
export type Note = Schemas['Note'] & { author?: Author | null };
export type Contact = Schemas['Contact'];
export type Counts =
  paths['/v1/conversations/counts']['get']['responses'][200]['content']['application/json'];
export type Template = Schemas['Template'];
export type User = Schemas['User'];
export type Team = Schemas['Team'];
export type CannedResponse = Schemas['CannedResponse'];
export type Channel = Conversation['channel'];

export interface Author {
  type: 'user';
  id: string;
  name: string;
}

export interface SessionUser {
  id: string;
  name: string | null;
  email: string;
  role: 'admin' | 'agent';
}
export interface Session {
  user: SessionUser;
  account: { id: string; name: string; plan: string };
  csrf_token: string;
}

export interface Presence {
  conversation_id: string;
  user: { id: string; name: string };
  state: 'viewing' | 'typing';
  expires_at: string;
}

export interface Upload {
  id: string;
  content_type: string;
  size: number;
  filename: string | null;
}

/** Every stream event: the webhook envelope. */
export interface LiveEvent {
  id?: string;
  event: string;
  timestamp?: string;
  data: unknown;
}

export type View = 'mine' | 'unassigned' | 'all';
export type Status = 'open' | 'resolved';
