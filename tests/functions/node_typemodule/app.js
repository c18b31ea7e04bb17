// A .js file that is an ES module because package.json says "type": "module".
export async function handler(event) {
  return { kind: 'type-module', isModule: typeof require === 'undefined', event };
}
