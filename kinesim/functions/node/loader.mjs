// Loading the handler as AWS's runtime does (the RIC's UserFunction.js): a path relative to the task
// root, CommonJS or ES module by extension and by the nearest package.json's "type", AWS's errors.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

import { runtimeError } from './errors.mjs';

// AWS's runtime lives in /var/runtime: module-not-found texts name it as the require stack.
const runtimeRequire = createRequire('/var/runtime/index.mjs');
export const STREAMING = Symbol.for('aws.lambda.runtime.handler.streaming');

if (!['1', 'true'].includes(process.env.AWS_LAMBDA_NODEJS_NO_GLOBAL_AWSLAMBDA)) {
  globalThis.awslambda = {
    streamifyResponse: (handler) => {
      handler[STREAMING] = 'response';
      return handler;
    },
    HttpResponseStream: class HttpResponseStream {
      static from(stream) { return stream; }
    },
  };
}

function tryRequire(file) {
  return fs.existsSync(file) ? runtimeRequire(file) : undefined;
}

async function tryImport(file) {
  return fs.existsSync(file) ? import(pathToFileURL(file).href) : undefined;
}

function folderIsModule(folder) {
  if (folder.endsWith('/node_modules')) return false;
  const pj = path.join(folder, 'package.json');
  if (fs.existsSync(pj)) {
    try {
      const pkg = JSON.parse(fs.readFileSync(pj));
      if (pkg) return pkg.type === 'module';
    } catch (e) {
      console.warn(`${pj} cannot be read, it will be ignored for ES module detection purposes.`, e);
      return false;
    }
  }
  return folder === '/' ? false : folderIsModule(path.resolve(folder, '..'));
}

async function loadModule(appRoot, moduleRoot, module) {
  const base = path.resolve(appRoot, moduleRoot, module);
  const extensionless = tryRequire(base);
  if (extensionless) return extensionless;
  const isModule = fs.existsSync(base + '.js') && folderIsModule(path.dirname(base + '.js'));
  if (!isModule) {
    const loaded = tryRequire(base + '.js');
    if (loaded) return loaded;
  }
  const loaded = (isModule && (await tryImport(base + '.js'))) || (await tryImport(base + '.mjs'))
    || tryRequire(base + '.cjs');
  if (loaded) return loaded;
  return runtimeRequire(runtimeRequire.resolve(module, { paths: [appRoot, moduleRoot] }));
}

export async function loadHandler(appRoot, fullHandler) {
  if (fullHandler.includes('..')) {
    throw runtimeError('MalformedHandlerName', `'${fullHandler}' is not a valid handler name. Use absolute paths `
      + 'when specifying root directories in handler names.');
  }
  const moduleAndHandler = path.basename(fullHandler);
  const moduleRoot = fullHandler.substring(0, fullHandler.indexOf(moduleAndHandler));
  const match = moduleAndHandler.match(/^([^.]*)\.(.*)$/);
  if (!match) throw runtimeError('MalformedHandlerName', 'Bad handler');
  const [, module, handlerPath] = match;
  let app;
  try {
    app = await loadModule(appRoot, moduleRoot, module);
  } catch (e) {
    if (e instanceof SyntaxError) throw runtimeError('UserCodeSyntaxError', String(e));
    if (e.code === 'MODULE_NOT_FOUND') throw runtimeError('ImportModuleError', String(e));
    throw e;
  }
  const handler = handlerPath.split('.').reduce((nested, key) => nested && nested[key], app);
  if (!handler) throw runtimeError('HandlerNotFound', `${fullHandler} is undefined or not exported`);
  if (typeof handler !== 'function') throw runtimeError('HandlerNotFound', `${fullHandler} is not a function`);
  return handler;
}
