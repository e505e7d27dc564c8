export const channels = ['whatsapp', 'sms', 'email', 'ivr'] as const;
export type Channel = (typeof channels)[number];

export interface OutgoingMessage {
  channel: Channel;
  /** E.164 phone, or an email address for the email channel. */
  to: string;
  body: string;
  subject?: string;
  /** Our id for the message, passed to the provider where it accepts one. */
  reference?: string;
}

export interface SendResult {
  /** The provider's id for the message, used to match its delivery reports. */
  providerMessageId: string;
}

/** One outgoing channel of one provider. Implementations throw ProviderError when the provider refuses. */
export interface MessageProvider {
  readonly name: string;
  readonly channel: Channel;
  send(message: OutgoingMessage): Promise<SendResult>;
}

export class ProviderError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

export type Providers = Readonly<Record<Channel, MessageProvider>>;
