exports.handler = async (event) => {
  return {;
};
