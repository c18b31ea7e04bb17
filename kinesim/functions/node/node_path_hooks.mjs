// ES module imports that also search NODE_PATH, as AWS's Node.js 18+ runtimes make them do: "The
// Node.js 18.x runtime for Lambda searches the folders listed in NODE_PATH when loading ES modules.
// This makes it easier to include the AWS SDK as an ES module or load ES modules from Lambda
// layers" (AWS Compute Blog, "Node.js 18.x runtime now available in AWS Lambda"; quoted in
// aws/aws-sdk-js#4431). Node.js itself searches NODE_PATH for require() only.
//
// Only when Node.js's own resolution fails (the function's node_modules always win), and only for
// a package that is in a NODE_PATH directory: that directory's copy is then resolved by Node.js's
// own algorithm (package.json "exports" and conditions included), from inside it.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

let directories = [];

function packageName(specifier) {
  // bare specifiers only: not relative, absolute, a URL (file:, node:, data:) or a #import
  if (/^(\.{0,2}\/|#|[a-zA-Z][a-zA-Z\d+.-]*:)/.test(specifier)) return null;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

// Where to resolve `specifier` from instead: a module inside each NODE_PATH node_modules directory
// that holds the package (walking up from there, Node.js finds it in that directory first).
function candidates(specifier) {
  const name = packageName(specifier);
  if (name === null) return [];
  return directories.filter((dir) => path.basename(dir) === 'node_modules' && fs.existsSync(path.join(dir, name)))
    .map((dir) => pathToFileURL(path.join(dir, '__kinesim_node_path__.mjs')).href);
}

function notFound(error) {
  return error?.code === 'ERR_MODULE_NOT_FOUND';
}

// module.registerHooks (Node.js 22.15+, 23.5+): synchronous, in this thread
export function syncHooks(dirs) {
  directories = dirs;
  return {
    resolve(specifier, context, nextResolve) {
      try {
        return nextResolve(specifier, context);
      } catch (error) {
        if (!notFound(error)) throw error;
        for (const parentURL of candidates(specifier)) {
          try {
            return nextResolve(specifier, { ...context, parentURL });
          } catch { /* the next directory */ }
        }
        throw error;
      }
    },
  };
}

// module.register (Node.js 18.19+, 20.6+): the same, in the loader thread
export function initialize(data) {
  directories = data.directories;
}

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    if (!notFound(error)) throw error;
    for (const parentURL of candidates(specifier)) {
      try {
        return await nextResolve(specifier, { ...context, parentURL });
      } catch { /* the next directory */ }
    }
    throw error;
  }
}
