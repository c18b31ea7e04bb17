exports.NAME = 'helper';
