import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Channel, MessageProvider, OutgoingMessage, SendResult } from './provider.ts';

/**
 * Sends nothing out. Writes each outgoing message as one log line with channel, to and body (the only
 * place personal data may reach the logs) and keeps a record of every send, so tests can prove what went
 * out and that nothing went out twice.
 */
export class SandboxProvider implements MessageProvider {
  readonly name = 'sandbox';
  readonly sent: Array<OutgoingMessage & { providerMessageId: string }> = [];

  constructor(
    readonly channel: Channel,
    private readonly log: FastifyBaseLogger,
  ) {}

  async send(message: OutgoingMessage): Promise<SendResult> {
    const providerMessageId = `sandbox_${randomUUID()}`;
    this.sent.push({ ...message, providerMessageId });
    this.log.info(
      {
        provider: 'sandbox',
        channel: message.channel,
        to: message.to,
        body: message.body,
        provider_message_id: providerMessageId,
      },
      'sandbox message',
    );
    return { providerMessageId };
  }
}
