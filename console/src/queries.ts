import { useQuery } from '@tanstack/react-query';
import { api, data, session } from './api.ts';

/**
 * The queries more than one screen reads, each under one key, so that a change made on one screen (a new time
 * zone, say) is seen on every other.
 */

/**
 * GET /api/workspace: its name, its time zone and what carries each channel. The key holds the session's
 * token, so that another member signing in on this tab never sees the last one's workspace.
 */
export const workspaceKey = ['workspace'] as const;
export function useWorkspace(enabled = true) {
  return useQuery({
    queryKey: [...workspaceKey, session.token()],
    queryFn: () => data(api.GET('/api/workspace')),
    enabled,
  });
}

/** The providers an account can be of, from the service (each provider's adapter declares its fields). */
export function useProviders() {
  return useQuery({
    queryKey: ['providers'],
    queryFn: () => data(api.GET('/api/channel-accounts/providers')),
    staleTime: Infinity,
  });
}
