console.log('about to fail');
throw new Error('init failed on purpose');
