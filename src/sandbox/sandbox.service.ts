import type { Scope } from '../db/transactor.js';
import { ValidationError } from '../errors.js';
import type {
  Message,
  SandboxInboundBody,
  SandboxStatusBody,
} from '../messages/messages.schema.js';
import type { MessagesService } from '../messages/messages.service.js';
import type { Template, ReviewTemplateBody } from '../templates/templates.schema.js';
import type { TemplatesService } from '../templates/templates.service.js';
import type { ConnectionsService } from '../connections/connections.service.js';
import type { SandboxProvider } from '../channels/sandbox/sandbox.provider.js';

/**
 * The sandbox's controls: what a real provider would do through its callbacks and review desk.
 * Only on channels that use the sandbox: on a channel connected to a real provider they are a
 * 422, so that nothing simulated mixes with what the provider reports.
 */
export class SandboxService {
  constructor(
    private readonly deps: {
      sandbox: SandboxProvider;
      messages: MessagesService;
      templates: TemplatesService;
      connections: ConnectionsService;
    },
  ) {}

  /** A contact writes in, as a provider's inbound callback would say. */
  async inbound(scope: Scope, body: SandboxInboundBody): Promise<Message> {
    if ((body.phone === undefined) === (body.contact_id === undefined))
      throw new ValidationError('phone', 'give exactly one of phone and contact_id');
    await this.deps.connections.requireSandbox(scope, { channel: body.channel });
    return this.deps.messages.receive(scope, this.deps.sandbox.parseInbound(body));
  }

  /** A delivery report on an outbound message, as a provider's status callback would say. */
  async setStatus(scope: Scope, messageId: string, body: SandboxStatusBody): Promise<Message> {
    await this.deps.connections.requireSandbox(scope, { messageId });
    return this.deps.messages.applyStatus(scope, {
      messageId,
      status: body.status,
      reason: body.reason,
    });
  }

  /** The provider's review of a template (refused for Meta's templates: Meta reviews those). */
  review(scope: Scope, templateId: string, body: ReviewTemplateBody): Promise<Template> {
    return this.deps.templates.review(scope, templateId, body.status);
  }
}
