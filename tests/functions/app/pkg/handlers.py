import helper


def handler(event, context):
    return {"module": __name__, "helper": helper.NAME}
