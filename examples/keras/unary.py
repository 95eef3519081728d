"""Element-wise layers on two Dense branches from inputs of different widths: Add()([a, b]) and
subtract([a, b]); the model is compiled and its FFModel initialised, without training."""

from flexflow.keras.layers import Add, Dense, Input, subtract
from flexflow.keras.models import Model
from flexflow.keras.optimizers import SGD


def top_level_task():
    first, second = Input(shape=(16,)), Input(shape=(32,))
    a = Dense(8, activation="relu")(first)
    b = Dense(8, activation="relu")(second)
    t = subtract([Add()([a, b]), b])
    model = Model([first, second], Dense(4, activation="softmax")(t))
    print(model.summary())
    model.compile(optimizer=SGD(learning_rate=0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.ffmodel.init_layers()
    print(f"compiled {len(model.ffmodel.get_layers())} FFModel layers")


if __name__ == "__main__":
    print("Element-wise add and subtract")
    top_level_task()
