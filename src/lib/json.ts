/**
 * The deepest nesting of objects and arrays a JSON body may have. No request or provider callback of the
 * service nests deeper than a few levels; a body nested thousands deep only overflows the stack of whatever walks
 * it next (validation, signature checks, NUL checks).
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `text` nests objects and arrays deeper than `max` (strings skipped), in one pass, before any parse. */
export function nestsDeeperThan(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // a backslash: the next character is escaped
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

/** The 400's words for a body nested too deep. */
export const tooDeep = `The JSON body nests objects and arrays more than ${MAX_JSON_DEPTH} deep; nothing was read: flatten it.`;
