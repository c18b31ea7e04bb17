// The runtime's errors in AWS's shapes (the RIC's Errors.js): Runtime.* classes, the invocation's
// error payload.
import util from 'node:util';

// The runtime's own error classes: their name (on the prototype, so not logged as a property) is Runtime.*
const runtimeErrorClasses = new Map();
export function runtimeError(name, message) {
  if (!runtimeErrorClasses.has(name)) {
    const cls = class extends Error {};
    cls.prototype.name = `Runtime.${name}`;
    runtimeErrorClasses.set(name, cls);
  }
  return new (runtimeErrorClasses.get(name))(message);
}

function isErrorLike(e) {
  return e && typeof e.name === 'string' && typeof e.message === 'string' && typeof e.stack === 'string';
}

// The invocation's error payload: {errorType, errorMessage, trace}
export function toResponse(error) {
  try {
    if (util.types.isNativeError(error) || isErrorLike(error)) {
      return { errorType: error.name?.replaceAll('\x7F', '%7F'), errorMessage: error.message?.replaceAll('\x7F', '%7F'),
        trace: error.stack.replaceAll('\x7F', '%7F').split('\n') };
    }
    return { errorType: typeof error, errorMessage: String(error), trace: [] };
  } catch {
    return { errorType: 'handled', errorMessage: 'callback called with Error argument, but there was a problem '
      + 'while retrieving one or more of its message, name, and stack' };
  }
}

export const intoError = (err) => (err instanceof Error ? err : new Error(err));
