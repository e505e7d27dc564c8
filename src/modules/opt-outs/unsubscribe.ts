import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * One-click unsubscribe links (RFC 8058). The link names the workspace and the address, signed with an HMAC
 * under APP_KEY: it works without signing in, cannot be forged for another address, and needs no table.
 */
export const UNSUBSCRIBE_PATH = '/api/unsubscribe';

function signature(appKey: Buffer, payload: string): string {
  return createHmac('sha256', appKey).update(`list-unsubscribe\n${payload}`).digest('base64url');
}

export function unsubscribeToken(appKey: Buffer, workspaceId: number, email: string): string {
  const payload = Buffer.from(`${workspaceId}:${email}`, 'utf8').toString('base64url');
  return `${payload}.${signature(appKey, payload)}`;
}

/** The workspace and address of a token whose signature verifies; undefined otherwise. */
export function readUnsubscribeToken(
  appKey: Buffer,
  token: string,
): { workspaceId: number; email: string } | undefined {
  const [payload, given, extra] = token.split('.');
  if (!payload || !given || extra !== undefined) return undefined;
  const expected = Buffer.from(signature(appKey, payload));
  const actual = Buffer.from(given);
  if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return undefined;
  const match = /^(\d{1,15}):(.+)$/s.exec(Buffer.from(payload, 'base64url').toString('utf8'));
  return match ? { workspaceId: Number(match[1]), email: match[2]! } : undefined;
}

/** The one-click unsubscribe URL of `email` in a workspace: POST opts out, GET shows a page with a button. */
export function unsubscribeUrl(appKey: Buffer, baseUrl: string, workspaceId: number, email: string): string {
  return `${baseUrl}${UNSUBSCRIBE_PATH}/${unsubscribeToken(appKey, workspaceId, email)}`;
}

/** The RFC 8058 headers of a campaign email to `email` of a workspace. */
export function listUnsubscribeHeaders(
  appKey: Buffer,
  baseUrl: string,
  workspaceId: number,
  email: string,
): Record<string, string> {
  return {
    'List-Unsubscribe': `<${unsubscribeUrl(appKey, baseUrl, workspaceId, email)}>`,
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
  };
}

/** The visible footer every campaign email's body ends with: the same link, for a person to click. */
export function unsubscribeFooter(url: string): string {
  return `\n\n--\nTo stop receiving these emails, unsubscribe: ${url}`;
}
