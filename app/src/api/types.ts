// The resources the app shows, as the OpenAPI document names them. Presence is the one shape
// the document has no route answer for: it only goes by on the event stream.
import type { components, paths } from './openapi.js';

type Schemas = components['schemas'];
export type Conversation = Schemas['Conversation'];
export type Message = Schemas['Message'];
export type Note = Schemas['Note'];
export type Contact = Schemas['Contact'];
export type Counts =
  paths['/v1/conversations/counts']['get']['responses'][200]['content']['application/json'];
export type Template = Schemas['Template'];
export type User = Schemas['User'];
export type Team = Schemas['Team'];
export type CannedResponse = Schemas['CannedResponse'];
export type Channel = Conversation['channel'];

export type Author = NonNullable<Message['author']>;
export type Session = paths['/v1/session']['get']['responses'][200]['content']['application/json'];
export type SessionUser = Session['user'];

export interface Presence {
  conversation_id: string;
  user: { id: string; name: string };
  state: 'viewing' | 'typing';
  expires_at: string;
}

export type Upload = paths['/v1/media']['post']['responses'][201]['content']['application/json'];

/** Every stream event: the webhook envelope. */
export interface LiveEvent {
  id?: string;
  event: string;
  timestamp?: string;
  data: unknown;
}

export type View = 'mine' | 'unassigned' | 'all';
export type Status = 'open' | 'resolved';
