import { createContext, useContext } from 'react';
export type Role = 'politician' | 'manager' | 'volunteer';

/** GET /api/user's data: the signed-in member and the workspace's credits. */
export interface Me {
  user: { id: number; name: string; email: string; phone: string | null; role: Role; workspace_id: number };
  credits: { sms_credits: number; whatsapp_credits: number; email_credits: number };
}
export const MeContext = createContext<Me | null>(null);

export function useMe(): Me {
  const me = useContext(MeContext);
  if (!me) throw new Error('useMe outside the shell');
  return me;
}
