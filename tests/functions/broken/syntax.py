def handler(event, context)
    return 1
