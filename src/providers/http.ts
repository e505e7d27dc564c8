import { AsyncLocalStorage } from 'node:async_hooks';
import { AnswerUnread, ProviderError, retryAfterMs } from './provider.ts';

/** One exchange with a provider's API, as the call saw it (bodies as sent and read, before any redaction). */
export interface Exchange {
  at?: string;
  method: string;
  url: string;
  /** Null: no answer (the network failed, or the call was abandoned). */
  status: number | null;
  durationMs: number | null;
  request: string;
  response: string;
}

/**
 * Where a call's exchanges go, for the call's duration: the sending module's hand-over sets it (the channel log),
 * every HTTP call to a provider reports to it. Nothing is recorded outside such a call.
 */
export const exchanges = new AsyncLocalStorage<(exchange: Exchange) => void>();

/** Reports an exchange to the current call's sink, if any. */
export function recordExchange(exchange: Exchange): void {
  exchanges.getStore()?.(exchange);
}

/** A provider's answer larger than this is a provider error, read no further (the contract's fourth part). */
export const MAX_ANSWER_BYTES = 1024 * 1024;

export interface ProviderAnswer {
  status: number;
  /** The JSON body, or {} when the body is not JSON. */
  body: Record<string, unknown>;
  /** A 429's or 503's `Retry-After`, in ms. */
  retryAfterMs?: number | undefined;
}

/**
 * A response's body as text, read up to MAX_ANSWER_BYTES. A longer 2xx is AnswerUnread (the provider took the
 * message: never retried); a longer answer of another status is read as empty, for its status to decide.
 */
export async function readCapped(provider: string, res: Response): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > MAX_ANSWER_BYTES) {
      await reader.cancel().catch(() => {});
      if (res.ok) throw new AnswerUnread(provider, res.status, MAX_ANSWER_BYTES);
      return '';
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The status's Retry-After, where a 429 or 503 gives one. */
export function retryAfterOf(res: Response): number | undefined {
  return res.status === 429 || res.status === 503 ? retryAfterMs(res.headers.get('retry-after')) : undefined;
}

/**
 * One HTTP call to a provider's API: a network failure (or the call's abort) is a retryable ProviderError;
 * any answer is returned for the adapter to read. The body is read as JSON where it is JSON.
 */
export async function callProvider(
  provider: string,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string },
  signal: AbortSignal | undefined,
): Promise<ProviderAnswer> {
  let res: Response;
  const at = new Date().toISOString();
  const started = performance.now();
  const record = (status: number | null, response: string) =>
    recordExchange({
      at,
      method: init.method,
      url,
      status,
      durationMs: performance.now() - started,
      request: init.body ?? '',
      response,
    });
  try {
    res = await fetch(url, { ...init, signal: signal ?? AbortSignal.timeout(15_000) });
  } catch (error) {
    record(null, (error as Error).message);
    throw new ProviderError(`${provider} could not be reached: ${(error as Error).message}`, true);
  }
  let text = '';
  try {
    text = await readCapped(provider, res);
  } catch (error) {
    if (error instanceof AnswerUnread) {
      record(res.status, `[more than ${MAX_ANSWER_BYTES / 1024} KB: unread]`);
      throw error;
    }
    // an error answer whose body cannot be read: its status says enough
  }
  record(res.status, text);
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: the adapter reports the status
  }
  return { status: res.status, body, retryAfterMs: retryAfterOf(res) };
}

/** Numbers and addresses as providers quote them in their texts: none of them reaches a log or `error_message`. */
const PERSONAL: readonly RegExp[] = [/\+?\b\d{10,15}\b/g, /[^\s<>"':;,@]{1,64}@[^\s<>"':;,@]{1,255}/gi];

/**
 * A provider's text, short and on one line, for `error_message` (and the log lines that carry it), with every
 * phone number and email address in it, and whatever the adapter's `redact` names, replaced by `…`.
 */
export function providerText(value: unknown, redact: readonly RegExp[] = []): string {
  // Cut first: the patterns then read at most a few hundred characters, however long the answer.
  let text = (typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value)).slice(
    0,
    400,
  );
  for (const pattern of [...redact, ...PERSONAL]) text = text.replace(pattern, '…');
  return text.replace(/\s+/g, ' ').trim().slice(0, 200) || 'no message';
}

/** A phone for providers that take it without the plus: country code and number. */
export const withoutPlus = (phone: string) => phone.replace(/^\+/, '');
