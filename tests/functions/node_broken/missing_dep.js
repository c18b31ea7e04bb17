const lib = require('not-a-package-anywhere');
exports.handler = async () => lib;
