import type { MessageErrorCode } from '../domain.ts';
import { within } from '../lib/time-limit.ts';

/** What an adapter's error table decides for an answer: our `error_code`, and whether (and when) to retry. */
export interface ErrorVerdict {
  error_code: MessageErrorCode;
  retry: boolean;
  /** Wait at least this long before the retry (Retry-After); undefined: the delivery schedule's. */
  after_ms?: number | undefined;
}

export const channels = ['whatsapp', 'sms', 'email', 'ivr'] as const;
export type Channel = (typeof channels)[number];

export interface OutgoingMessage {
  channel: Channel;
  /** E.164 phone, or an email address for the email channel. */
  to: string;
  body: string;
  subject?: string | undefined;
  mediaUrl?: string | undefined;
  templateId?: string | undefined;
  /** Our id for the message (`msg_<n>`), passed to the provider where it accepts one. */
  reference?: string | undefined;
  /** Extra email headers (List-Unsubscribe on campaign email); other channels ignore them. */
  headers?: Record<string, string> | undefined;
  /** SMS of a DLT-registered template (TRAI): the template id and header (sender id) it is registered with. */
  dltTemplateId?: string | undefined;
  senderId?: string | undefined;
  /**
   * A template of ours with an id at the provider (`provider_template_ids`), its language, and the values of
   * its variables in the order they appear in its body (rendered for this recipient). Providers that send
   * templates only, or templates outside WhatsApp's 24-hour window, use them.
   */
  providerTemplate?: ProviderTemplate | undefined;
  /** An IVR call of a survey: connected to the account's survey flow (its adapter's `surveyFlowSetting`). */
  surveyCall?: boolean | undefined;
}

export interface ProviderTemplate {
  /** The template's id per provider (`provider_template_ids`). */
  ids: Readonly<Record<string, string>>;
  language: string;
  /** Each variable of the body where it appears (repeats included), with its value for this recipient. */
  variables: Array<[string, string]>;
}

export interface SendResult {
  /** The provider's id for the message, used to match its delivery reports. */
  providerMessageId: string;
  /**
   * A batch the provider took while refusing some of its numbers: each refused message's index in the
   * batch and the provider's reason. Those fail alone (`invalid_recipient`); the others went.
   */
  refused?: Array<[number, string]>;
  /** A batch sent in parts: each message's provider id, by index (`providerMessageId` is the first). */
  ids?: string[];
}

export type FinalStatus = 'delivered' | 'failed';

/** A delivery report: the provider's word on a message it accepted earlier. */
export interface StatusReport {
  /** Our message id (number part of `msg_<n>`). */
  messageId: number;
  status: FinalStatus;
  error?: string | undefined;
  /** Why a failed message failed (default `undeliverable`: the provider reported a failure). */
  errorCode?: MessageErrorCode | undefined;
}

/**
 * One outgoing channel of one provider. Implementations throw ProviderError when the provider refuses
 * (retryable = false) or cannot be reached (retryable = true).
 */
export interface MessageProvider {
  readonly name: string;
  readonly channel: Channel;
  /** `signal` aborts a call that took too long (see sendWithin); a provider may ignore it. */
  send(message: OutgoingMessage, signal?: AbortSignal): Promise<SendResult>;
  /**
   * Providers that take many recipients in one request (up to `batchLimit` of one template): one
   * call for all of `messages`, one provider id (the request's) for them all.
   */
  sendMany?(messages: OutgoingMessage[], signal?: AbortSignal): Promise<SendResult>;
  readonly batchLimit?: number;
  /**
   * Providers without a callback of their own (the sandbox) tell the delivery worker after how long a message
   * they accepted ends (how it ends is their adapter's `simulated.settles`). The worker reads the due messages
   * from the database, so a report survives a restart.
   */
  readonly settlement?: { readonly afterMs: number };
  /** Releases connections (a mail server's pool) at shutdown. */
  close?(): void;
}

export class ProviderError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    /** The message's `error_code` when this ends it: `provider_rejected` unless the provider said more. */
    readonly code: MessageErrorCode = 'provider_rejected',
    /** A 429 or 503's `Retry-After`: the next try waits at least this long. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'ProviderError';
  }

  /** The error an adapter's error table decides for an answer. */
  static of(message: string, verdict: ErrorVerdict): ProviderError {
    return new ProviderError(message, verdict.retry, verdict.error_code, verdict.after_ms);
  }
}

/**
 * No answer came within PROVIDER_TIMEOUT_MS. The provider may have taken the message, so it is not sent again:
 * it is recorded `sent`, with this as its `error_message`, until a delivery report settles it (or
 * UNCONFIRMED_AFTER_HOURS pass without one).
 */
export class ProviderTimeout extends ProviderError {
  constructor(provider: string, timeoutMs: number) {
    super(
      `${provider} did not answer within ${timeoutMs / 1000} s: the message may have gone, and is not sent again; a delivery report settles it.`,
      false,
      'undeliverable',
    );
    this.name = 'ProviderTimeout';
  }
}

/**
 * The provider answered 2xx with a body too long to read (over MAX_ANSWER_BYTES). It said it took the message, so
 * the message is not sent again: it is recorded `sent` without the provider's id, with this as its
 * `error_message`, until a delivery report settles it.
 */
export class AnswerUnread extends Error {
  constructor(provider: string, status: number, limitBytes: number) {
    super(
      `${provider} answered ${status} with more than ${limitBytes / 1024} KB: taken as accepted, its answer unread (no provider id); a delivery report settles it.`,
    );
    this.name = 'AnswerUnread';
  }
}

/** `Retry-After` in ms (seconds, or an HTTP date), or undefined. */
export function retryAfterMs(header: string | null | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header.trim());
  if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds, 86_400) * 1000;
  const at = Date.parse(header);
  return Number.isFinite(at) ? Math.max(0, Math.min(at - now, 86_400_000)) : undefined;
}

/**
 * Hands a message to its provider within `timeoutMs` (PROVIDER_TIMEOUT_MS). Past it the call is given up
 * (and aborted where the provider can be) as a ProviderTimeout: whether the provider took the message is then
 * unknown, so it is not tried again (a call that never ends would hold its lane).
 */
export function sendWithin(
  provider: MessageProvider,
  message: OutgoingMessage | OutgoingMessage[],
  timeoutMs: number,
): Promise<SendResult> {
  const controller = new AbortController();
  const call = Array.isArray(message)
    ? provider.sendMany!(message, controller.signal)
    : provider.send(message, controller.signal);
  return within(call, timeoutMs, () => {
    controller.abort();
    throw new ProviderTimeout(provider.name, timeoutMs);
  });
}

export type Providers = Readonly<Record<Channel, MessageProvider>>;

/** What a provider's delivery report says of a message: applied through the conditional lifecycle updates. */
export type ReportOutcome =
  | { status: 'delivered' }
  | { status: 'failed'; code: MessageErrorCode; error: string }
  | { status: 'sent'; error: string };
