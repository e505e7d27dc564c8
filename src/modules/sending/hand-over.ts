import type { MessageErrorCode } from '../../domain.ts';
import {
  AnswerUnread,
  type MessageProvider,
  type OutgoingMessage,
  ProviderError,
  ProviderTimeout,
  sendWithin,
} from '../../providers/provider.ts';
import { type Exchange, exchanges } from '../../providers/http.ts';
import { type ChannelLog, type LogKind } from './channel-log.ts';
import type { Handover } from './outbox.repository.ts';

/** Where a channel account's call is logged (the channel log); the deployment's providers are not logged. */
export interface HandOverLog {
  log: ChannelLog;
  account: { id: number; workspace_id: number };
  kind: LogKind;
  /** The account's secrets (credentials), hidden wherever they appear in what is logged. */
  secrets: readonly string[];
}

/** What became of one message in one provider call. */
export type HandOverResult =
  /** The provider has it (or may have it: no answer in time, or an answer too long to read). Never sent again. */
  | { kind: 'handed'; handover: Handover }
  /**
   * The provider did not take it. `code` is the message's `error_code` if it fails now; `retryable` says whether
   * a worker may try again (after `retryAfterMs` at least). A single send never retries: it fails with `code`.
   */
  | { kind: 'refused'; reason: string; code: MessageErrorCode; retryable: boolean; retryAfterMs: number };

/**
 * The one hand-over to a provider, for single sends and the delivery worker alike: one call (bounded by
 * `timeoutMs`) for the messages of `ids` (one, or a provider's batch), and one classification of its answer, so
 * the same answer gives the same `error_code` on both paths:
 * - taken: handed over with the provider's id (a batch's refused numbers are `invalid_recipient` alone);
 * - no answer in time, or a 2xx too long to read: handed over without an id (the provider may have it; a
 *   delivery report settles it), never retried;
 * - a ProviderError: refused with its code, retryable as the adapter's error table said; once no retry is left a
 *   retryable refusal is `rate_limited` (the provider's throughput) or `undeliverable`;
 * - anything else (an adapter that could not read an answer): refused `provider_rejected`, not retried, since the
 *   provider may have taken the message.
 */
export async function handOver(
  provider: MessageProvider,
  ids: readonly number[],
  message: OutgoingMessage | OutgoingMessage[],
  timeoutMs: number,
  logged?: HandOverLog,
): Promise<HandOverResult[]> {
  if (!logged) return call(provider, ids, message, timeoutMs);
  const seen: Exchange[] = [];
  const results = await exchanges.run(
    (exchange) => void seen.push(exchange),
    () => call(provider, ids, message, timeoutMs),
  );
  // Written after the call, in the log's own batches: the send never waits for it.
  const refusal = results.find((r) => r.kind === 'refused');
  logged.log.add(logged.account, logged.kind, seen, {
    messageId: ids.length === 1 ? ids[0]! : null,
    errorCode: refusal?.kind === 'refused' ? refusal.code : null,
    secrets: logged.secrets,
  });
  return results;
}

async function call(
  provider: MessageProvider,
  ids: readonly number[],
  message: OutgoingMessage | OutgoingMessage[],
  timeoutMs: number,
): Promise<HandOverResult[]> {
  try {
    const result = await sendWithin(provider, message, timeoutMs);
    const refusedAt = new Map(result.refused ?? []);
    return ids.map((id, i) => {
      const why = refusedAt.get(i);
      return why !== undefined
        ? { kind: 'refused', reason: why, code: 'invalid_recipient', retryable: false, retryAfterMs: 0 }
        : {
            kind: 'handed',
            handover: {
              id,
              provider: provider.name,
              providerMessageId: result.ids?.[i] || result.providerMessageId,
            },
          };
    });
  } catch (error) {
    const reason = (error instanceof Error ? error.message : String(error)).slice(0, 300);
    if (error instanceof ProviderTimeout || error instanceof AnswerUnread)
      return ids.map((id) => ({
        kind: 'handed',
        handover: { id, provider: provider.name, providerMessageId: null, note: reason },
      }));
    const refusal =
      error instanceof ProviderError
        ? {
            code: error.code,
            retryable: error.retryable,
            retryAfterMs: error.retryAfterMs ?? 0,
          }
        : { code: 'provider_rejected' as const, retryable: false, retryAfterMs: 0 };
    return ids.map(() => ({ kind: 'refused', reason, ...refusal }));
  }
}

/** The `error_code` a refusal ends its message with once it is not tried again. */
export function finalCode(refusal: { code: MessageErrorCode; retryable: boolean }): MessageErrorCode {
  if (!refusal.retryable) return refusal.code;
  return refusal.code === 'rate_limited' ? 'rate_limited' : 'undeliverable';
}
