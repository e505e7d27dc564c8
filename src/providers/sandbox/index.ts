import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Type } from 'typebox';
import type { ProviderAdapter } from '../adapter.ts';
import type { Channel, FinalStatus, MessageProvider, OutgoingMessage, SendResult } from '../provider.ts';

/**
 * Sends nothing out. Writes each outgoing message as one log line with channel, to and body (the only
 * place personal data may reach the logs) and, when asked to, keeps a record of every send, so tests can
 * prove what went out and that nothing went out twice. Reports delivery `delayMs` after the send: a phone ending in 0000
 * or an email starting with "fail" fails, every other recipient is delivered.
 */
export class SandboxProvider implements MessageProvider {
  readonly name = 'sandbox';
  readonly sent: Array<OutgoingMessage & { providerMessageId: string }> = [];
  readonly settlement: { readonly afterMs: number };

  constructor(
    readonly channel: Channel,
    private readonly log: FastifyBaseLogger,
    delayMs = 500,
    /** Keep every send in `sent` (tests); off in the service, where the list would only grow. */
    private readonly record = false,
    /**
     * A workspace's own sandbox channel account: its line names the message and the channel, never the
     * address or the body (the deployment's sandbox is the one place personal data may reach the logs).
     */
    private readonly quiet = false,
  ) {
    this.settlement = { afterMs: delayMs };
  }

  async send(message: OutgoingMessage): Promise<SendResult> {
    const providerMessageId = `sandbox_${randomUUID()}`;
    if (this.record) this.sent.push({ ...message, providerMessageId });
    this.log.info(
      {
        provider: 'sandbox',
        channel: message.channel,
        ...(this.quiet ? {} : { to: message.to, body: message.body }),
        reference: message.reference,
        ...(message.dltTemplateId ? { dlt_template_id: message.dltTemplateId } : {}),
        ...(message.senderId ? { sender_id: message.senderId } : {}),
        provider_message_id: providerMessageId,
      },
      'sandbox message',
    );
    return { providerMessageId };
  }
}

export function sandboxOutcome(to: string): FinalStatus {
  if (to.includes('@')) return to.toLowerCase().startsWith('fail') ? 'failed' : 'delivered';
  return to.endsWith('0000') ? 'failed' : 'delivered';
}

/** Sends nothing: what it "sends" is written to the log (the deployment's) or only counted (an account's). */
export const sandbox: ProviderAdapter = {
  name: 'sandbox',
  label: 'Sandbox',
  channels: ['sms', 'whatsapp', 'email', 'ivr'],
  settings: Type.Object({}),
  credentials: Type.Object({}),
  callbacks: [],
  simulated: { settles: sandboxOutcome },
  deployment: { prefix: 'SANDBOX', callbacks: [] },
  // It never refuses a message.
  redact: [],
  create: (c) => new SandboxProvider(c.channel, c.log, c.sandboxDelayMs, false, c.ownAccount),
};
