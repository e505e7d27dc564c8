import { ProviderError } from './provider.ts';

export interface ProviderAnswer {
  status: number;
  /** The JSON body, or {} when the body is not JSON. */
  body: Record<string, unknown>;
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
  try {
    res = await fetch(url, { ...init, signal: signal ?? AbortSignal.timeout(15_000) });
  } catch (error) {
    throw new ProviderError(`${provider} could not be reached: ${(error as Error).message}`, true);
  }
  const text = await res.text().catch(() => ''); // an error answer whose body cannot be read: its status says enough
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed))
      body = parsed as Record<string, unknown>;
  } catch {
    // not JSON: the adapter reports the status
  }
  return { status: res.status, body };
}

/** A provider's text, short and on one line, for `error_message`. */
export function providerText(value: unknown): string {
  const text = typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value);
  return text.replace(/\s+/g, ' ').trim().slice(0, 200) || 'no message';
}

/** A phone for providers that take it without the plus (MSG91, Meta): country code and number. */
export const withoutPlus = (phone: string) => phone.replace(/^\+/, '');
